import { ACCUMULATOR_LIMITS, type Accumulator, mergeAccumulator } from './accumulators.js';

/**
 * A profile's Engage state: its identify traits and, per computation, the
 * accumulators its definition needs. Plain JSON (the runtime stores it as
 * is), bounded in size whatever the number of events.
 */

/** What Engage needs of one stored message (the runtime builds it from the stored JSON). */
export interface EngageMessage {
  readonly type: 'identify' | 'track' | 'page' | 'screen' | 'group' | 'alias';
  readonly event?: string;
  readonly properties?: Record<string, unknown>;
  readonly traits?: Record<string, unknown>;
  /** ms, the skew-corrected timestamp */
  readonly timestamp: number;
}

export const STATE_LIMITS = Object.freeze({
  /** Distinct identify trait keys kept per profile; later new keys are not kept. */
  traitKeys: 200,
  /** Characters of one trait value as JSON; a longer value is not kept (the previous one stays). */
  traitValueLength: 4_096,
  /** What each accumulator keeps. */
  ...ACCUMULATOR_LIMITS,
});

export interface ComputationState {
  /** Hash of the definition the accumulators were built for; another definition ignores them. */
  h: string;
  /** One accumulator per event condition (a computed trait has one; an audience one per performed/notPerformed), null until its first event. */
  a: Array<Accumulator | null>;
}

export interface ProfileState {
  /** Version of this layout. */
  v: 1;
  /** Identify traits, key by key. */
  traits: Record<string, unknown>;
  /** Timestamp of the message each trait came from (the newest wins). */
  traitTimes: Record<string, number>;
  /** Per computation id. */
  acc: Record<string, ComputationState>;
}

export function emptyProfileState(): ProfileState {
  return { v: 1, traits: {}, traitTimes: {}, acc: {} };
}

/** Profile traits from identify messages (merged key by key, newest wins). */
export function profileTraits(state: ProfileState): Record<string, unknown> {
  return { ...state.traits };
}

/**
 * Merges identify traits into the state, key by key: a key takes the value of
 * the message with the newest timestamp (equal timestamps: the larger JSON
 * text, so that arrival order never matters). Mutates.
 */
export function applyTraits(state: ProfileState, traits: Record<string, unknown>, timestamp: number): void {
  const keys = { count: Object.keys(state.traitTimes).length };
  for (const key of Object.keys(traits)) {
    const value = traits[key];
    if (value !== undefined) setTrait(state, keys, key, value, timestamp);
  }
}

/** `keys.count` is the number of trait keys the state has (counted once per message, not per key). */
function setTrait(state: ProfileState, keys: { count: number }, key: string, value: unknown, timestamp: number): void {
  // Assigning `__proto__` would change the object's prototype instead of adding a key.
  if (key === '__proto__') return;
  const known = Object.hasOwn(state.traitTimes, key);
  if (!known && keys.count >= STATE_LIMITS.traitKeys) return;
  const text = typeof value === 'string' && value.length <= STATE_LIMITS.traitValueLength / 2 ? undefined : JSON.stringify(value);
  if (text !== undefined && text.length > STATE_LIMITS.traitValueLength) return;
  if (known) {
    const previous = state.traitTimes[key]!;
    if (previous > timestamp) return;
    // Equal timestamps: the larger JSON text wins, so that the order of arrival does not matter.
    if (previous === timestamp && JSON.stringify(state.traits[key]) >= (text ?? JSON.stringify(value))) return;
  } else keys.count++;
  state.traits[key] = value;
  state.traitTimes[key] = timestamp;
}

/**
 * Merges two profiles' states (identity merge): traits newest-wins, accumulators
 * combined (counts, sums, buckets add up; first/last/min/max compare; unique
 * lists and most_frequent candidates keep their bounds). An accumulator built
 * for another version of a definition than its counterpart (different hash)
 * is dropped in favour of `a`'s. Neither argument is changed.
 */
export function mergeProfileStates(a: ProfileState, b: ProfileState): ProfileState {
  const merged = structuredClone(a);
  const keys = { count: Object.keys(merged.traitTimes).length };
  for (const key of Object.keys(b.traitTimes)) setTrait(merged, keys, key, b.traits[key], b.traitTimes[key]!);
  for (const [id, theirs] of Object.entries(b.acc)) {
    const mine = merged.acc[id];
    if (mine === undefined) {
      merged.acc[id] = structuredClone(theirs);
      continue;
    }
    if (mine.h !== theirs.h) continue;
    theirs.a.forEach((accumulator, index) => {
      if (!accumulator) return;
      const into = mine.a[index];
      if (!into) mine.a[index] = structuredClone(accumulator);
      else mergeAccumulator(into, accumulator);
    });
  }
  return merged;
}
