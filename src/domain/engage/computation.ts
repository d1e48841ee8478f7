import { compare, readPath } from '../conditions.js';
import { type FoldName, type LeafShape, countAt, foldAt, mostFrequentAt, uniqueAt, uniqueCountAt } from './accumulators.js';
import type { AudienceCondition, AudienceDefinition, ComputedTraitDefinition, EventSelector, PropertyCondition, WindowedEvent } from './definitions.js';
import type { ComputationState, ProfileState } from './state.js';
import { bucketSizeFor, parseWithin } from './windows.js';

/**
 * One computed trait or audience compiled from its definition: its event
 * conditions (leaves, each with the accumulator it folds into), the hash
 * that tells its accumulators from those of another version, and how its
 * output is read from them. EngageModel (model.ts) holds the compiled
 * computations of all definitions together.
 */

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

/** One event condition of a computation, compiled. */
export interface Leaf extends LeafShape {
  readonly computation: Computation;
  /** Its accumulator's place in the computation's state. */
  readonly index: number;
  readonly where: readonly PropertyCondition[];
  /** The property whose values are folded (computed traits other than event_counter). */
  readonly property: string | undefined;
  readonly selector: EventSelector;
}

export interface Computation {
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

export interface EvaluationContext {
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

export function compileTrait(spec: ComputationSpec, definition: ComputedTraitDefinition): Computation {
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

export function compileAudience(spec: ComputationSpec, definition: AudienceDefinition): Computation {
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
export function visitReferences(condition: AudienceCondition, field: string, found: (kind: 'trait' | 'audience', key: string, field: string) => void): void {
  if ('inAudience' in condition) found('audience', condition.inAudience, `${field}.inAudience`);
  else if ('notInAudience' in condition) found('audience', condition.notInAudience, `${field}.notInAudience`);
  else if ('computedTrait' in condition) found('trait', condition.computedTrait.key, `${field}.computedTrait.key`);
  else if ('and' in condition) condition.and.forEach((c, i) => visitReferences(c, `${field}.and[${i}]`, found));
  else if ('or' in condition) condition.or.forEach((c, i) => visitReferences(c, `${field}.or[${i}]`, found));
  else if ('not' in condition) visitReferences(condition.not, `${field}.not`, found);
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
