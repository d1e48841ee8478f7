import { expiryOf, WINDOW_BUCKETS } from './windows.js';

/**
 * Accumulators: what a profile keeps of the events one event condition
 * matches. Counts, sums, minimums, maximums, first and last values are folds
 * of per-event cells that combine in any order, so messages may arrive out of
 * timestamp order and two profiles' accumulators merge exactly. Windowed
 * accumulators keep one cell per time bucket (see windows.ts); all-time ones
 * keep a single cell. most_frequent and unique lists keep bounded maps of
 * values instead (rules below).
 */

/** The bounds of what one accumulator keeps (a profile's own bounds are in state.ts's STATE_LIMITS). */
export const ACCUMULATOR_LIMITS = Object.freeze({
  /** Distinct values a unique list keeps: the most recently seen. */
  uniqueValues: 100,
  /** Candidate values most_frequent counts. */
  frequentCandidates: 50,
  /** Characters of a value (as JSON) that first, last, unique_list and most_frequent keep. */
  valueLength: 1_000,
});

/**
 * One accumulator: a fold of the matching events' values, either over all
 * time (`v`) or per time bucket (`b`, sorted by bucket index). Plain JSON:
 * it is stored as part of the profile's state.
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
  /** unique_list(_count): [value JSON, newest timestamp seen], sorted by that time. */
  u?: Array<[string, number]>;
}

export type FoldName = 'n' | 's' | 'lo' | 'hi' | 'f' | 'l' | 'mf' | 'u';

/** What one event condition folds, with its window. */
export interface LeafShape {
  readonly fold: FoldName;
  /** Window in ms; undefined = all time. */
  readonly windowMs: number | undefined;
  /** Bucket size in ms; undefined = all time. */
  readonly bucketMs: number | undefined;
}

type Cell = unknown;
interface CellFold {
  /** The cell of one event, or undefined when the event's value does not count (e.g. not a number). */
  readonly lift: (timestamp: number, value: unknown) => Cell;
  readonly combine: (a: Cell, b: Cell) => Cell;
}

const COUNT: CellFold = { lift: () => 1, combine: (a, b) => (a as number) + (b as number) };
const SUM: CellFold = {
  lift: (_t, value) => (isFiniteNumber(value) ? [value, 1] : undefined),
  combine: (a, b) => {
    const [sa, na] = a as [number, number];
    const [sb, nb] = b as [number, number];
    return [sa + sb, na + nb];
  },
};
const MIN: CellFold = { lift: (_t, value) => (isFiniteNumber(value) ? value : undefined), combine: (a, b) => Math.min(a as number, b as number) };
const MAX: CellFold = { lift: (_t, value) => (isFiniteNumber(value) ? value : undefined), combine: (a, b) => Math.max(a as number, b as number) };
/** first/last cells are [timestamp, value]; equal timestamps are decided by the values' JSON so that order never matters. */
const FIRST: CellFold = {
  lift: (t, value) => (keepableValue(value) ? [t, value] : undefined),
  combine: (a, b) => (earlier(a as TimedValue, b as TimedValue) ? a : b),
};
const LAST: CellFold = {
  lift: (t, value) => (keepableValue(value) ? [t, value] : undefined),
  combine: (a, b) => (earlier(a as TimedValue, b as TimedValue) ? b : a),
};
const CELL_FOLDS: Partial<Record<FoldName, CellFold>> = { n: COUNT, s: SUM, lo: MIN, hi: MAX, f: FIRST, l: LAST };

type TimedValue = [number, unknown];
function earlier(a: TimedValue, b: TimedValue): boolean {
  if (a[0] !== b[0]) return a[0] < b[0];
  return JSON.stringify(a[1]) <= JSON.stringify(b[1]);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** first/last keep any JSON value but null, up to ACCUMULATOR_LIMITS.valueLength characters. */
function keepableValue(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'object') return typeof value !== 'string' || value.length <= ACCUMULATOR_LIMITS.valueLength;
  return JSON.stringify(value).length <= ACCUMULATOR_LIMITS.valueLength;
}

/** most_frequent and unique lists count scalars: strings (up to the length limit), finite numbers, booleans. As JSON text, or undefined. */
function scalarKey(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length <= ACCUMULATOR_LIMITS.valueLength ? JSON.stringify(value) : undefined;
  if (isFiniteNumber(value) || typeof value === 'boolean') return JSON.stringify(value);
  return undefined;
}

export function newAccumulator(shape: LeafShape): Accumulator {
  return shape.bucketMs === undefined ? { f: shape.fold } : { f: shape.fold, w: shape.bucketMs };
}

/** Most buckets a window keeps: those that can still count, plus slack for one partial bucket at each end. */
function bucketCap(shape: LeafShape): number {
  return Math.ceil(shape.windowMs! / shape.bucketMs!) + 2;
}

/** Any window keeps at most WINDOW_BUCKETS + 2 buckets (see bucketCap), so a merge keeps the newest that many; the next add trims to the window's own cap. */
const MERGE_BUCKET_CAP = WINDOW_BUCKETS + 2;

/** Adds one event (its timestamp and the value of the definition's property) to an accumulator. Mutates it. */
export function addEvent(acc: Accumulator, shape: LeafShape, timestamp: number, value: unknown): void {
  if (shape.fold === 'u') return addUnique(acc, timestamp, value);
  if (shape.fold === 'mf') return addFrequent(acc, shape, timestamp, value);
  const fold = CELL_FOLDS[shape.fold]!;
  const cell = fold.lift(timestamp, value);
  if (cell === undefined) return;
  if (shape.bucketMs === undefined) {
    acc.v = acc.v === undefined ? cell : fold.combine(acc.v, cell);
    return;
  }
  const buckets = (acc.b ??= []);
  addToBuckets(buckets, Math.floor(timestamp / shape.bucketMs), cell, fold.combine, bucketCap(shape));
}

/** Adds a cell to sorted buckets; keeps at most `cap` buckets, dropping the oldest (time only moves forward for windows). */
function addToBuckets<C>(buckets: Array<[number, C]>, index: number, cell: C, combine: (a: C, b: C) => C, cap: number): void {
  let at = buckets.length;
  // Messages mostly arrive in order: search from the newest bucket.
  while (at > 0 && buckets[at - 1]![0] > index) at--;
  const previous = buckets[at - 1];
  if (previous !== undefined && previous[0] === index) {
    previous[1] = combine(previous[1], cell);
    return;
  }
  buckets.splice(at, 0, [index, cell]);
  if (buckets.length > cap) buckets.splice(0, buckets.length - cap);
}

/**
 * Unique lists keep, per distinct value, the newest timestamp it was seen
 * at, as [value JSON, timestamp] pairs sorted from the one seen longest ago
 * (equal times: the larger JSON text first). Beyond ACCUMULATOR_LIMITS.uniqueValues
 * values the first is dropped, so the kept values are the most recently seen
 * ones whatever the order messages arrive in; and the values a window still
 * counts are always a tail of the list.
 */
function addUnique(acc: Accumulator, timestamp: number, value: unknown): void {
  const key = scalarKey(value);
  if (key === undefined) return;
  const values = (acc.u ??= []);
  // Recently seen values are at the end: search from there.
  for (let i = values.length - 1; i >= 0; i--) {
    if (values[i]![0] !== key) continue;
    if (values[i]![1] >= timestamp) return;
    values.splice(i, 1);
    break;
  }
  insertSeen(values, [key, timestamp]);
  if (values.length > ACCUMULATOR_LIMITS.uniqueValues) values.splice(0, values.length - ACCUMULATOR_LIMITS.uniqueValues);
}

function seenBefore(a: [string, number], b: [string, number]): boolean {
  return a[1] < b[1] || (a[1] === b[1] && a[0] > b[0]);
}

function insertSeen(values: Array<[string, number]>, entry: [string, number]): void {
  let at = values.length;
  while (at > 0 && seenBefore(entry, values[at - 1]!)) at--;
  values.splice(at, 0, entry);
}

/** The index of the first unique value that still counts at `now` (all of them when all time). */
function firstLiveValue(values: Array<[string, number]>, shape: LeafShape, now: number): number {
  if (shape.bucketMs === undefined) return 0;
  // Sorted by time and the expiry grows with time: binary search.
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (expiryOf(values[middle]![1], shape.windowMs!, shape.bucketMs) > now) high = middle;
    else low = middle + 1;
  }
  return low;
}

/**
 * most_frequent counts at most ACCUMULATOR_LIMITS.frequentCandidates distinct values.
 * All time, the Space-Saving rule (Metwally et al.): a new value when the
 * candidates are full replaces the one with the smallest count (ties: larger
 * JSON text) and starts from that count + 1, so a value making more than
 * 1/50 of the events is never lost, and counts overstate by at most the
 * smallest count. Windowed, a new value replaces the candidate with the
 * fewest events kept (ties: the one seen longest ago, then larger JSON) and
 * starts from 1. Exact while there are at most 50 distinct values.
 */
function addFrequent(acc: Accumulator, shape: LeafShape, timestamp: number, value: unknown): void {
  const key = scalarKey(value);
  if (key === undefined) return;
  const candidates = (acc.c ??= {});
  if (shape.bucketMs === undefined) {
    const count = candidates[key] as number | undefined;
    if (count !== undefined) {
      candidates[key] = count + 1;
      return;
    }
    let start = 1;
    if (Object.keys(candidates).length >= ACCUMULATOR_LIMITS.frequentCandidates) {
      const victim = smallestCandidate(candidates, (c) => c as number, () => 0);
      start = (candidates[victim] as number) + 1;
      delete candidates[victim];
    }
    candidates[key] = start;
    return;
  }
  const index = Math.floor(timestamp / shape.bucketMs);
  let buckets = candidates[key] as Array<[number, number]> | undefined;
  if (buckets === undefined) {
    if (Object.keys(candidates).length >= ACCUMULATOR_LIMITS.frequentCandidates) {
      delete candidates[smallestCandidate(candidates, (c) => totalCount(c as Array<[number, number]>), (c) => newestBucket(c as Array<[number, number]>))];
    }
    buckets = candidates[key] = [];
  }
  addToBuckets(buckets, index, 1, (a, b) => a + b, bucketCap(shape));
}

function smallestCandidate<C>(candidates: Record<string, C>, count: (c: C) => number, recency: (c: C) => number): string {
  let victim = '';
  let victimCount = Infinity;
  let victimRecency = Infinity;
  for (const [key, entry] of Object.entries(candidates)) {
    const n = count(entry);
    const r = recency(entry);
    if (n < victimCount || (n === victimCount && (r < victimRecency || (r === victimRecency && key > victim)))) {
      victim = key;
      victimCount = n;
      victimRecency = r;
    }
  }
  return victim;
}

function totalCount(buckets: Array<[number, number]>): number {
  let total = 0;
  for (const [, n] of buckets) total += n;
  return total;
}

function newestBucket(buckets: Array<[number, number]>): number {
  return buckets.length === 0 ? -Infinity : buckets[buckets.length - 1]![0];
}

/** The first bucket index that still counts at `now`: bucket k counts while (k + 1)·B + W > now. */
function firstLiveBucket(shape: LeafShape, now: number): number {
  return Math.floor((now - shape.windowMs!) / shape.bucketMs!);
}

/** The folded cell of the events that count at `now`, or undefined when none does (cell folds only). */
export function foldAt(acc: Accumulator | null | undefined, shape: LeafShape, now: number): unknown {
  if (!acc) return undefined;
  if (shape.bucketMs === undefined) return acc.v;
  const buckets = acc.b;
  if (!buckets) return undefined;
  const fold = CELL_FOLDS[shape.fold]!;
  const from = firstLiveBucket(shape, now);
  let result: unknown = undefined;
  for (let i = buckets.length - 1; i >= 0; i--) {
    const [index, cell] = buckets[i]!;
    if (index < from) break;
    result = result === undefined ? cell : fold.combine(cell, result);
  }
  return result;
}

/** The number of events that count at `now` (count folds; the hot path of audiences, hence its own loop). */
export function countAt(acc: Accumulator | null | undefined, shape: LeafShape, now: number): number {
  if (!acc) return 0;
  if (shape.bucketMs === undefined) return (acc.v as number | undefined) ?? 0;
  const buckets = acc.b as Array<[number, number]> | undefined;
  if (!buckets) return 0;
  const from = firstLiveBucket(shape, now);
  let count = 0;
  for (let i = buckets.length - 1; i >= 0; i--) {
    const bucket = buckets[i]!;
    if (bucket[0] < from) break;
    count += bucket[1];
  }
  return count;
}

/** How many values a unique list has at `now`. */
export function uniqueCountAt(acc: Accumulator | null | undefined, shape: LeafShape, now: number): number {
  const values = acc?.u;
  return values ? values.length - firstLiveValue(values, shape, now) : 0;
}

/** The values of a unique list at `now`, as JSON texts. */
export function uniqueAt(acc: Accumulator | null | undefined, shape: LeafShape, now: number): string[] {
  const values = acc?.u;
  if (!values) return [];
  const keys: string[] = [];
  for (let i = firstLiveValue(values, shape, now); i < values.length; i++) keys.push(values[i]![0]);
  return keys;
}

/** The most frequent value at `now` as JSON text (ties: the smaller JSON text), or undefined. */
export function mostFrequentAt(acc: Accumulator | null | undefined, shape: LeafShape, now: number): string | undefined {
  const candidates = acc?.c;
  if (!candidates) return undefined;
  const from = shape.bucketMs === undefined ? 0 : firstLiveBucket(shape, now);
  let best: string | undefined;
  let bestCount = 0;
  for (const [key, entry] of Object.entries(candidates)) {
    let count = 0;
    if (typeof entry === 'number') count = entry;
    else for (const [index, n] of entry) if (index >= from) count += n;
    if (count > bestCount || (count === bestCount && count > 0 && best !== undefined && key < best)) {
      best = key;
      bestCount = count;
    }
  }
  return best;
}

/** The earliest expiry > now of anything the accumulator keeps, or Infinity. */
export function nextExpiryOf(acc: Accumulator | null | undefined, shape: LeafShape, now: number): number {
  if (!acc || shape.bucketMs === undefined) return Infinity;
  let next = Infinity;
  if (acc.b) next = Math.min(next, nextBucketExpiry(acc.b, shape, now));
  if (acc.c) for (const entry of Object.values(acc.c)) if (typeof entry !== 'number') next = Math.min(next, nextBucketExpiry(entry, shape, now));
  if (acc.u) {
    const first = acc.u[firstLiveValue(acc.u, shape, now)];
    if (first !== undefined) next = Math.min(next, expiryOf(first[1], shape.windowMs!, shape.bucketMs));
  }
  return next;
}

/** The expiry of the oldest bucket still counted (buckets are sorted, so later ones expire later), or Infinity. */
function nextBucketExpiry(buckets: ReadonlyArray<readonly [number, unknown]>, shape: LeafShape, now: number): number {
  const from = firstLiveBucket(shape, now);
  for (const [index] of buckets) if (index >= from) return (index + 1) * shape.bucketMs! + shape.windowMs!;
  return Infinity;
}

/** Drops what no longer counts at `now`; returns whether anything is left. Mutates. */
export function pruneAccumulator(acc: Accumulator, shape: LeafShape, now: number): boolean {
  if (shape.bucketMs === undefined) return acc.v !== undefined || acc.c !== undefined || acc.u !== undefined;
  const from = firstLiveBucket(shape, now);
  const live = (buckets: Array<[number, unknown]>): number => {
    let drop = 0;
    while (drop < buckets.length && buckets[drop]![0] < from) drop++;
    if (drop > 0) buckets.splice(0, drop);
    return buckets.length;
  };
  if (acc.b && live(acc.b) === 0) delete acc.b;
  if (acc.c) {
    for (const [key, entry] of Object.entries(acc.c)) if (typeof entry !== 'number' && live(entry) === 0) delete acc.c[key];
    if (Object.keys(acc.c).length === 0) delete acc.c;
  }
  if (acc.u) {
    acc.u.splice(0, firstLiveValue(acc.u, shape, now));
    if (acc.u.length === 0) delete acc.u;
  }
  return acc.b !== undefined || acc.c !== undefined || acc.u !== undefined;
}

/**
 * Merges accumulator `from` into `into` (same fold and bucket size; the
 * definition hash guarantees it). Cell folds merge exactly; unique lists and
 * most_frequent keep their bounds (most_frequent: the candidates with the
 * largest counts). Mutates `into`.
 */
export function mergeAccumulator(into: Accumulator, from: Accumulator): void {
  const fold = CELL_FOLDS[into.f];
  if (fold) {
    if (from.v !== undefined) into.v = into.v === undefined ? from.v : fold.combine(into.v, from.v);
    if (from.b) {
      const buckets = (into.b ??= []);
      for (const [index, cell] of from.b) addToBuckets(buckets, index, cell, fold.combine, MERGE_BUCKET_CAP);
    }
    return;
  }
  if (from.u) {
    const newest = new Map<string, number>(into.u ?? []);
    for (const [key, seen] of from.u) newest.set(key, Math.max(newest.get(key) ?? -Infinity, seen));
    const values = [...newest].sort((a, b) => (seenBefore(a, b) ? -1 : seenBefore(b, a) ? 1 : 0));
    into.u = values.slice(Math.max(0, values.length - ACCUMULATOR_LIMITS.uniqueValues));
  }
  if (from.c) {
    const candidates = (into.c ??= {});
    for (const [key, entry] of Object.entries(from.c)) {
      const mine = candidates[key];
      if (typeof entry === 'number') candidates[key] = ((mine as number | undefined) ?? 0) + entry;
      else {
        const buckets = (mine as Array<[number, number]> | undefined) ?? [];
        for (const [index, n] of entry) addToBuckets(buckets, index, n, (a, b) => a + b, MERGE_BUCKET_CAP);
        candidates[key] = buckets;
      }
    }
    const keys = Object.keys(candidates);
    if (keys.length > ACCUMULATOR_LIMITS.frequentCandidates) {
      const size = (entry: number | Array<[number, number]>): number => (typeof entry === 'number' ? entry : totalCount(entry));
      keys.sort((x, y) => size(candidates[y]!) - size(candidates[x]!) || (x < y ? -1 : x > y ? 1 : 0));
      for (const key of keys.slice(ACCUMULATOR_LIMITS.frequentCandidates)) delete candidates[key];
    }
  }
}
