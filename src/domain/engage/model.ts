import { compare, readPath } from '../conditions.js';
import { isJsonObject } from '../message.js';
import {
  type AudienceCondition,
  type AudienceDefinition,
  type ComputedTraitDefinition,
  type EventSelector,
  type PropertyCondition,
  type WindowedEvent,
  parseAudienceDefinition,
  parseComputedTraitDefinition,
} from './definitions.js';
import { DefinitionError } from './errors.js';
import {
  type FoldName,
  type LeafShape,
  addEvent,
  countAt,
  foldAt,
  mostFrequentAt,
  newAccumulator,
  nextExpiryOf,
  pruneAccumulator,
  uniqueAt,
  uniqueCountAt,
} from './accumulators.js';
import { type ComputationState, type EngageMessage, type ProfileState, applyTraits } from './state.js';
import { bucketSizeFor, parseWithin } from './windows.js';

export type ComputationKind = 'trait' | 'audience';

/** A stored computed trait or audience, as the runtime loads it. */
export interface ComputationSpec {
  /** 'ct_…' or 'aud_…' */
  readonly id: string;
  readonly kind: ComputationKind;
  readonly key: string;
  /** the JSON as posted (already validated once) */
  readonly definition: unknown;
}

/** Value of every computation for a profile: audiences boolean, traits value or undefined (no value). */
export type Outputs = Record<string, unknown>;

/** One event condition of a computation, compiled. */
interface Leaf extends LeafShape {
  readonly computation: Computation;
  /** Its accumulator's place in the computation's state. */
  readonly index: number;
  readonly where: readonly PropertyCondition[];
  /** The property whose values are folded (computed traits other than event_counter). */
  readonly property: string | undefined;
  readonly selector: EventSelector;
}

interface Computation {
  readonly spec: ComputationSpec;
  /** Hash of the normalized definition: accumulators built for another version are not read. */
  readonly hash: string;
  readonly leaves: Leaf[];
  /** Computed traits: the value from the (single) leaf's accumulator. */
  readonly traitValue?: (accumulators: ComputationState['a'] | undefined, now: number) => unknown;
  /** Audiences: membership. */
  readonly audienceTest?: (context: EvaluationContext) => boolean;
  /** Audiences: whether a profile trait is read (identify messages may change it). */
  readonly readsTraits: boolean;
}

interface EvaluationContext {
  readonly state: ProfileState;
  readonly now: number;
  /** The accumulators of the audience being evaluated (undefined: none yet, or built for another definition). */
  accumulators: ComputationState['a'] | undefined;
  readonly traitsByKey: Map<string, unknown>;
  readonly audiencesByKey: Map<string, boolean>;
}

const TRAIT_FOLDS: Record<Exclude<ComputedTraitDefinition['type'], 'aggregation'>, FoldName> = {
  event_counter: 'n',
  most_frequent: 'mf',
  first: 'f',
  last: 'l',
  unique_list: 'u',
  unique_list_count: 'u',
};
const AGGREGATION_FOLDS: Record<'sum' | 'avg' | 'min' | 'max', FoldName> = { sum: 's', avg: 's', min: 'lo', max: 'hi' };

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

function makeLeaf(computation: Computation, index: number, event: WindowedEvent, fold: FoldName, property: string | undefined, field: string): Leaf {
  const windowMs = event.within === undefined ? undefined : parseWithin(event.within, `${field}.within`);
  const leaf: Leaf = {
    computation,
    index,
    fold,
    windowMs,
    bucketMs: windowMs === undefined ? undefined : bucketSizeFor(windowMs),
    where: event.where ?? [],
    property,
    selector: event.event,
  };
  return leaf;
}

function compileTrait(spec: ComputationSpec, definition: ComputedTraitDefinition): Computation {
  const fold = definition.type === 'aggregation' ? AGGREGATION_FOLDS[definition.fn] : TRAIT_FOLDS[definition.type];
  const property = definition.type === 'event_counter' ? undefined : definition.property;
  const leaves: Leaf[] = [];
  const computation: Computation = { spec, hash: hashOf('trait', definition), leaves, traitValue: traitValueOf(definition, leaves), readsTraits: false };
  leaves.push(makeLeaf(computation, 0, definition, fold, property, 'definition'));
  return computation;
}

/**
 * A computed trait's value. Counts and sums have no value for a profile that
 * never had a matching event (so that a new trait is not sent to every
 * profile as 0), and are 0 once the profile's events have all left the window.
 */
function traitValueOf(definition: ComputedTraitDefinition, leaves: readonly Leaf[]): (accumulators: ComputationState['a'] | undefined, now: number) => unknown {
  const accumulator = (accumulators: ComputationState['a'] | undefined) => accumulators?.[0];
  switch (definition.type) {
    case 'event_counter':
      return (a, now) => {
        const acc = accumulator(a);
        return acc ? countAt(acc, leaves[0]!, now) : undefined;
      };
    case 'aggregation':
      if (definition.fn === 'sum' || definition.fn === 'avg') {
        const average = definition.fn === 'avg';
        return (a, now) => {
          const acc = accumulator(a);
          const cell = foldAt(acc, leaves[0]!, now) as [number, number] | undefined;
          if (cell === undefined) return average || !acc ? undefined : 0;
          return average ? cell[0] / cell[1] : cell[0];
        };
      }
      return (a, now) => foldAt(accumulator(a), leaves[0]!, now);
    case 'first':
    case 'last':
      return (a, now) => (foldAt(accumulator(a), leaves[0]!, now) as [number, unknown] | undefined)?.[1];
    case 'most_frequent':
      return (a, now) => {
        const key = mostFrequentAt(accumulator(a), leaves[0]!, now);
        return key === undefined ? undefined : parseScalar(key);
      };
    case 'unique_list':
      return (a, now) => {
        const keys = uniqueAt(accumulator(a), leaves[0]!, now);
        return keys.length === 0 ? undefined : sortValues(keys.map(parseScalar));
      };
    case 'unique_list_count':
      return (a, now) => {
        const acc = accumulator(a);
        return acc ? uniqueCountAt(acc, leaves[0]!, now) : undefined;
      };
  }
}

/** The value of a scalar's JSON text; plain strings (the usual case) without a full JSON.parse. */
function parseScalar(json: string): unknown {
  if (json.charCodeAt(0) === 34 /* " */ && !json.includes('\\')) return json.slice(1, -1);
  return JSON.parse(json) as unknown;
}

/** Unique lists are sorted so that their value changes only when the set does: numbers, then strings, then booleans. */
function sortValues(values: unknown[]): unknown[] {
  const rank = (value: unknown): number => (typeof value === 'number' ? 0 : typeof value === 'string' ? 1 : 2);
  return values.sort((a, b) => {
    const byKind = rank(a) - rank(b);
    if (byKind !== 0) return byKind;
    if (typeof a === 'number') return a - (b as number);
    const x = String(a);
    const y = String(b);
    return x < y ? -1 : x > y ? 1 : 0;
  });
}

function compileAudience(spec: ComputationSpec, definition: AudienceDefinition): Computation {
  const leaves: Leaf[] = [];
  let readsTraits = false;
  const holder: { computation?: Computation } = {};
  const build = (condition: AudienceCondition, field: string): ((context: EvaluationContext) => boolean) => {
    if ('performed' in condition) {
      const { count } = condition.performed;
      const leaf = makeLeaf(holder.computation!, leaves.length, condition.performed, 'n', undefined, `${field}.performed`);
      leaves.push(leaf);
      return (context) => compare(countAt(context.accumulators?.[leaf.index], leaf, context.now), count.op, count.value);
    }
    if ('notPerformed' in condition) {
      const leaf = makeLeaf(holder.computation!, leaves.length, condition.notPerformed, 'n', undefined, `${field}.notPerformed`);
      leaves.push(leaf);
      return (context) => countAt(context.accumulators?.[leaf.index], leaf, context.now) === 0;
    }
    if ('trait' in condition) {
      readsTraits = true;
      const { key, op, value } = condition.trait;
      return (context) => compare(readPath(context.state.traits, key), op, value);
    }
    if ('computedTrait' in condition) {
      const { key, op, value } = condition.computedTrait;
      return (context) => compare(context.traitsByKey.get(key), op, value);
    }
    if ('inAudience' in condition) {
      const key = condition.inAudience;
      return (context) => context.audiencesByKey.get(key) === true;
    }
    if ('notInAudience' in condition) {
      const key = condition.notInAudience;
      return (context) => context.audiencesByKey.get(key) !== true;
    }
    if ('and' in condition) {
      const parts = condition.and.map((c, i) => build(c, `${field}.and[${i}]`));
      return (context) => {
        for (const part of parts) if (!part(context)) return false;
        return true;
      };
    }
    if ('or' in condition) {
      const parts = condition.or.map((c, i) => build(c, `${field}.or[${i}]`));
      return (context) => {
        for (const part of parts) if (part(context)) return true;
        return false;
      };
    }
    const inner = build(condition.not, `${field}.not`);
    return (context) => !inner(context);
  };
  // The computation object is created first so that its leaves can point to it.
  const computation = { spec, hash: hashOf('audience', definition), leaves, readsTraits: false } as Computation & { audienceTest: Computation['audienceTest']; readsTraits: boolean };
  holder.computation = computation;
  computation.audienceTest = build(definition, 'definition');
  computation.readsTraits = readsTraits;
  return computation;
}

/** Calls `found` for every inAudience/notInAudience/computedTrait of a condition, with its field path. */
function visitReferences(condition: AudienceCondition, field: string, found: (kind: 'trait' | 'audience', key: string, field: string) => void): void {
  if ('inAudience' in condition) found('audience', condition.inAudience, `${field}.inAudience`);
  else if ('notInAudience' in condition) found('audience', condition.notInAudience, `${field}.notInAudience`);
  else if ('computedTrait' in condition) found('trait', condition.computedTrait.key, `${field}.computedTrait.key`);
  else if ('and' in condition) condition.and.forEach((c, i) => visitReferences(c, `${field}.and[${i}]`, found));
  else if ('or' in condition) condition.or.forEach((c, i) => visitReferences(c, `${field}.or[${i}]`, found));
  else if ('not' in condition) visitReferences(condition.not, `${field}.not`, found);
}

/** Properties for track, page and screen; traits for identify and group. */
function propertiesOf(message: EngageMessage): Record<string, unknown> | undefined {
  return message.type === 'identify' || message.type === 'group' ? message.traits : message.properties;
}

/**
 * The layout of accumulators; raising it makes every stored accumulator one
 * of "another version", so that none is read in an old layout.
 */
const ACCUMULATOR_LAYOUT = 2;

/** FNV-1a (32 bits) of the normalized definition and the layout: short, and stable across processes. */
function hashOf(kind: ComputationKind, definition: unknown): string {
  const text = `${ACCUMULATOR_LAYOUT}:${kind}:${JSON.stringify(definition)}`;
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(36);
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
