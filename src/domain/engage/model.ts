import { compare, readPath } from '../conditions.js';
import { isJsonObject } from '../message.js';
import { addEvent, newAccumulator, nextExpiryOf, pruneAccumulator } from './accumulators.js';
import {
  type Computation,
  type ComputationSpec,
  type EvaluationContext,
  type Leaf,
  compileAudience,
  compileTrait,
  visitReferences,
} from './computation.js';
import { type AudienceDefinition, type ComputedTraitDefinition, parseAudienceDefinition, parseComputedTraitDefinition } from './definitions.js';
import { DefinitionError } from './errors.js';
import { type ComputationState, type EngageMessage, type ProfileState, applyTraits } from './state.js';

export type { ComputationKind, ComputationSpec } from './computation.js';

/** Value of every computation for a profile: audiences boolean, traits value or undefined (no value). */
export type Outputs = Record<string, unknown>;

export class EngageModel {
  private readonly byId = new Map<string, Computation>();
  /** Computed traits, then audiences in dependency order. */
  private readonly order: Computation[] = [];
  /** Leaves by the track event name they match, and by the message type they match. */
  private readonly leavesByEvent = new Map<string, Leaf[]>();
  private readonly leavesByType = new Map<string, Leaf[]>();
  /** Audiences that read profile traits. */
  private readonly traitReaders: Computation[] = [];
  /** Audiences that read a computation's output, by that computation's id. */
  private readonly dependents = new Map<string, Computation[]>();

  private constructor(readonly specs: readonly ComputationSpec[]) {}

  /** Compiles the current definitions; throws DefinitionError on an unknown referenced key or a cycle. */
  static compile(specs: readonly ComputationSpec[]): EngageModel {
    const model = new EngageModel(Object.freeze([...specs]));
    const traitKeys = new Map<string, Computation>();
    const audienceKeys = new Map<string, Computation>();
    const audiences: Array<{ computation: Computation; definition: AudienceDefinition }> = [];
    const seenKeys = new Map<string, string>();
    for (const spec of specs) {
      if (model.byId.has(spec.id)) throw new DefinitionError('id', `${spec.id} is defined twice`);
      const sameKey = seenKeys.get(spec.key);
      if (sameKey !== undefined) throw new DefinitionError('key', `"${spec.key}" is the key of both ${sameKey} and ${spec.id}`);
      seenKeys.set(spec.key, spec.id);
      let computation: Computation;
      if (spec.kind === 'trait') {
        computation = compileTrait(spec, parseComputedTraitDefinition(spec.definition));
        traitKeys.set(spec.key, computation);
      } else {
        const definition = parseAudienceDefinition(spec.definition);
        computation = compileAudience(spec, definition);
        audienceKeys.set(spec.key, computation);
        audiences.push({ computation, definition });
      }
      model.byId.set(spec.id, computation);
      for (const leaf of computation.leaves) model.indexLeaf(leaf);
    }
    for (const computation of model.byId.values()) if (computation.spec.kind === 'trait') model.order.push(computation);

    // Audiences after what they read: depth-first, naming the field of an unknown key and the path of a cycle.
    const references = new Map<Computation, Computation[]>();
    for (const { computation, definition } of audiences) {
      const reads: Computation[] = [];
      visitReferences(definition, 'definition', (kind, key, field) => {
        const target = (kind === 'trait' ? traitKeys : audienceKeys).get(key);
        if (!target) throw new DefinitionError(field, `names no ${kind === 'trait' ? 'computed trait' : 'audience'} with key "${key}" (in "${computation.spec.key}")`);
        reads.push(target);
        const list = model.dependents.get(target.spec.id) ?? [];
        if (!list.includes(computation)) list.push(computation);
        model.dependents.set(target.spec.id, list);
      });
      references.set(computation, reads.filter((c) => c.spec.kind === 'audience'));
      if (computation.readsTraits) model.traitReaders.push(computation);
    }
    const done = new Set<Computation>();
    const path: Computation[] = [];
    const visit = (computation: Computation): void => {
      if (done.has(computation)) return;
      if (path.includes(computation)) {
        const cycle = [...path.slice(path.indexOf(computation)), computation].map((c) => c.spec.key).join(' → ');
        throw new DefinitionError('definition', `makes a cycle of audiences: ${cycle}`);
      }
      path.push(computation);
      for (const target of references.get(computation) ?? []) visit(target);
      path.pop();
      done.add(computation);
      model.order.push(computation);
    };
    for (const { computation } of audiences) visit(computation);
    return model;
  }

  private indexLeaf(leaf: Leaf): void {
    const selector = leaf.selector;
    const [map, key] = typeof selector === 'string' ? [this.leavesByEvent, selector] : [this.leavesByType, selector.type];
    const list = map.get(key) ?? [];
    list.push(leaf);
    map.set(key, list);
  }

  /** The leaves whose event condition this message meets. */
  private matchingLeaves(message: EngageMessage): Leaf[] {
    const byType = this.leavesByType.get(message.type);
    const byEvent = message.type === 'track' && typeof message.event === 'string' ? this.leavesByEvent.get(message.event) : undefined;
    const candidates = byType && byEvent ? [...byType, ...byEvent] : (byType ?? byEvent);
    if (!candidates) return [];
    const source = propertiesOf(message);
    return candidates.filter((leaf) => leaf.where.every((c) => compare(readPath(source, c.property), c.op, c.value)));
  }

  /**
   * Ids of computations whose outputs this message may change: those whose
   * accumulators it changes, audiences reading profile traits (identify), and
   * audiences reading any of those. In evaluation order.
   */
  affectedBy(message: EngageMessage): readonly string[] {
    const affected = new Set<Computation>();
    for (const leaf of this.matchingLeaves(message)) affected.add(leaf.computation);
    if (message.type === 'identify' && message.traits) for (const reader of this.traitReaders) affected.add(reader);
    const queue = [...affected];
    while (queue.length > 0) {
      for (const dependent of this.dependents.get(queue.pop()!.spec.id) ?? []) {
        if (!affected.has(dependent)) {
          affected.add(dependent);
          queue.push(dependent);
        }
      }
    }
    return this.order.filter((c) => affected.has(c)).map((c) => c.spec.id);
  }

  /**
   * Applies one message: traits (identify) and accumulators. Returns the new state (may mutate
   * and return the given one). `only`: apply to these computation ids' accumulators only
   * (backfill of a new/changed definition over stored history; traits untouched).
   * An accumulator built for another version of a definition is replaced.
   */
  apply(state: ProfileState, message: EngageMessage, only?: ReadonlySet<string>): ProfileState {
    if (!Number.isFinite(message.timestamp)) return state;
    if (only === undefined && message.type === 'identify' && isJsonObject(message.traits)) applyTraits(state, message.traits, message.timestamp);
    const leaves = this.matchingLeaves(message);
    if (leaves.length === 0) return state;
    const source = propertiesOf(message);
    for (const leaf of leaves) {
      const computation = leaf.computation;
      if (only !== undefined && !only.has(computation.spec.id)) continue;
      let computationState = state.acc[computation.spec.id];
      if (computationState === undefined || computationState.h !== computation.hash) {
        computationState = { h: computation.hash, a: computation.leaves.map(() => null) };
        state.acc[computation.spec.id] = computationState;
      }
      const accumulator = (computationState.a[leaf.index] ??= newAccumulator(leaf));
      addEvent(accumulator, leaf, message.timestamp, leaf.property === undefined ? undefined : readPath(source, leaf.property));
    }
    return state;
  }

  /** Forgets the accumulator of a computation (definition changed/deleted). */
  reset(state: ProfileState, computationId: string): ProfileState {
    delete state.acc[computationId];
    return state;
  }

  /** Every output at time `now` (windows slide relative to now). Audiences in dependency order. */
  evaluate(state: ProfileState, now: number): Outputs {
    const outputs: Outputs = {};
    const context: EvaluationContext = { state, now, accumulators: undefined, traitsByKey: new Map(), audiencesByKey: new Map() };
    for (const computation of this.order) {
      const accumulators = this.accumulatorsOf(state, computation);
      if (computation.traitValue) {
        const value = computation.traitValue(accumulators, now);
        outputs[computation.spec.id] = value;
        context.traitsByKey.set(computation.spec.key, value);
      } else {
        context.accumulators = accumulators;
        const member = computation.audienceTest!(context);
        outputs[computation.spec.id] = member;
        context.audiencesByKey.set(computation.spec.key, member);
      }
    }
    return outputs;
  }

  /** Earliest time > now at which some output may change without a new message (a window expiring); undefined if none. */
  nextExpiry(state: ProfileState, now: number): number | undefined {
    let next = Infinity;
    for (const computation of this.order) {
      const accumulators = this.accumulatorsOf(state, computation);
      if (!accumulators) continue;
      for (const leaf of computation.leaves) {
        if (leaf.bucketMs === undefined) continue;
        const expiry = nextExpiryOf(accumulators[leaf.index], leaf, now);
        if (expiry < next) next = expiry;
      }
    }
    return next === Infinity ? undefined : next;
  }

  /**
   * Drops what no window still needs at `now` (old buckets, expired unique
   * values), and the accumulators of computations this model does not have
   * (deleted) or has in another version. Call before storing, with a model
   * of the current definitions.
   */
  prune(state: ProfileState, now: number): ProfileState {
    for (const [id, computationState] of Object.entries(state.acc)) {
      const computation = this.byId.get(id);
      if (!computation || computationState.h !== computation.hash) {
        delete state.acc[id];
        continue;
      }
      // A computed trait's emptied accumulator stays: it says the profile once matched (a count of 0, not no value).
      const keepEmpty = computation.spec.kind === 'trait';
      let left = false;
      computation.leaves.forEach((leaf) => {
        const accumulator = computationState.a[leaf.index];
        if (!accumulator) return;
        if (pruneAccumulator(accumulator, leaf, now) || keepEmpty) left = true;
        else computationState.a[leaf.index] = null;
      });
      if (!left) delete state.acc[id];
    }
    return state;
  }

  private accumulatorsOf(state: ProfileState, computation: Computation): ComputationState['a'] | undefined {
    const computationState = state.acc[computation.spec.id];
    return computationState !== undefined && computationState.h === computation.hash ? computationState.a : undefined;
  }
}

/** Properties for track, page and screen; traits for identify and group. */
function propertiesOf(message: EngageMessage): Record<string, unknown> | undefined {
  return message.type === 'identify' || message.type === 'group' ? message.traits : message.properties;
}

/**
 * Changed outputs between two evaluations: [id, newValue] (audience false on
 * leave; trait undefined→null when a value disappears). An id missing from
 * `before` counts as undefined; ids missing from `after` (deleted
 * computations) are not changes. For a profile's first evaluation, diff
 * against `evaluate(emptyProfileState(), now)` so that audiences it is not in
 * are not reported as `false`.
 */
export function diffOutputs(before: Outputs, after: Outputs): Array<[id: string, value: unknown]> {
  const changes: Array<[string, unknown]> = [];
  for (const id of Object.keys(after)) {
    const next = after[id];
    const previous = before[id];
    if (sameValue(previous, next)) continue;
    changes.push([id, next === undefined ? null : next]);
  }
  return changes;
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

export type { AudienceDefinition, ComputedTraitDefinition };
