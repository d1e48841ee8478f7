import { DefinitionError } from './errors.js';

/**
 * Sliding windows (`within`: "90s", "15m", "24h", "30d") are kept as time
 * buckets, so a profile's state does not grow with its number of events.
 *
 * A window of W ms uses buckets of B ms, B the smallest step of BUCKET_LADDER
 * with W / B <= WINDOW_BUCKETS. Buckets are aligned on multiples of B since
 * the Unix epoch. An event at time t lives in bucket floor(t / B) and counts
 * while `now < (floor(t / B) + 1) * B + W`: never less than the exact window
 * (every event of the last W ms counts) and at most B longer. As the ladder's
 * steps grow by at most 2.5×, B <= W / 25: a 30-day window has 12-hour
 * buckets, a 24-hour window 30-minute buckets, a 1-hour window 1-minute buckets.
 */
export const WINDOW_BUCKETS = 64;

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const BUCKET_LADDER: readonly number[] = [
  1, 2, 5, 10, 20, 50, 100, 200, 500,
  SECOND, 2 * SECOND, 5 * SECOND, 10 * SECOND, 15 * SECOND, 30 * SECOND,
  MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
  HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, 4 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, 60 * DAY,
];

const UNIT_MS: Readonly<Record<string, number>> = { s: SECOND, m: MINUTE, h: HOUR, d: DAY };

/** The longest window: ten years. */
export const MAX_WINDOW_MS = 3_650 * DAY;

/** "30d" → 2,592,000,000 ms. Throws a DefinitionError naming `field`. */
export function parseWithin(input: unknown, field: string): number {
  const match = typeof input === 'string' ? /^([1-9][0-9]{0,9})([smhd])$/.exec(input) : null;
  if (!match) throw new DefinitionError(field, 'must be a whole number followed by s, m, h or d, e.g. "30d"');
  const ms = Number(match[1]) * UNIT_MS[match[2]!]!;
  if (ms > MAX_WINDOW_MS) throw new DefinitionError(field, 'must be at most 3650d');
  return ms;
}

/** The bucket size of a window of `windowMs` (see above). */
export function bucketSizeFor(windowMs: number): number {
  for (const step of BUCKET_LADDER) if (windowMs / step <= WINDOW_BUCKETS) return step;
  return BUCKET_LADDER[BUCKET_LADDER.length - 1]!;
}

/** The time from which an event at `timestamp` no longer counts in a window of `windowMs` with buckets of `bucketMs`. */
export function expiryOf(timestamp: number, windowMs: number, bucketMs: number): number {
  return (Math.floor(timestamp / bucketMs) + 1) * bucketMs + windowMs;
}
