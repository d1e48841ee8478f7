/**
 * Traffic counts for the console's overview charts: messages received per
 * minute by status, and delivery rounds per minute by outcome. Stores keep
 * them as counters written in the same commit as what they count, so a chart
 * of the last hour reads about 60 rows per series instead of scanning an
 * hour of messages, and every node shows the same numbers.
 */

export const MINUTE_MS = 60_000;

export type TrafficMetric = 'messages' | 'deliveries';

/**
 * What a delivery round came to: `succeeded` and `failed` are final,
 * `retried` means the round failed and the delivery will be tried again.
 * Deferred rounds (nothing sent) are not counted.
 */
export type DeliveryRoundOutcome = 'succeeded' | 'failed' | 'retried';

export interface TrafficCount {
  /** Start of the minute, epoch ms. */
  readonly minute: number;
  readonly metric: TrafficMetric;
  /** A message status (`accepted`, `rejected`, …) or a {@link DeliveryRoundOutcome}. */
  readonly status: string;
  readonly count: number;
}

export function minuteOf(at: number): number {
  return Math.floor(at / MINUTE_MS) * MINUTE_MS;
}

/**
 * Adds up events into one count per (minute, status), so a commit writes a
 * few counter rows, not one per event. In (minute, status) order: two
 * commits that update the same counter rows (on PostgreSQL, two
 * connections whose shards coincide) lock them in one order, so neither
 * can wait for a row the other holds while holding one it wants.
 */
export function tally(events: Iterable<{ readonly at: number; readonly status: string }>): MinuteCount[] {
  const counts = new MinuteCounts();
  for (const { at, status } of events) counts.add(minuteOf(at), status, 1);
  return counts.sorted();
}

/** One counter change: `count` added to `status`'s count of `minute`. */
export interface MinuteCount {
  minute: number;
  status: string;
  count: number;
}

/** Counts added up per (minute, status), listed in (minute, status) order. */
class MinuteCounts {
  private readonly counts = new Map<string, MinuteCount>();

  add(minute: number, status: string, count: number): void {
    const key = `${minute} ${status}`;
    const entry = this.counts.get(key);
    if (entry === undefined) this.counts.set(key, { minute, status, count });
    else entry.count += count;
  }

  /** The counts that are not zero. */
  sorted(): MinuteCount[] {
    return [...this.counts.values()].filter((entry) => entry.count !== 0).sort((a, b) => a.minute - b.minute || (a.status < b.status ? -1 : a.status > b.status ? 1 : 0));
  }
}

/**
 * A counted message whose status changed after processing counted it. Its
 * transformation runs later, in the transform stage, and may drop it
 * (`filtered`), fail on it (`failed`) or, run again by a retry, pass it
 * after failing (`accepted` again); the debugger shows the new status, and
 * so must the overview.
 */
export interface StatusChange {
  /** When the message was received: the minute it stays counted in. */
  readonly receivedAt: number;
  readonly from: string;
  readonly to: string;
}

/**
 * The counter changes that move each message from its old status's count to
 * its new one's, in the minute it was received, netted per (minute,
 * status): each message stays counted once, so a minute's total is still
 * the number of messages received in it. A change to the same status moves
 * nothing (a retry that fails again); nets of zero are left out.
 */
export function recount(changes: Iterable<StatusChange>): MinuteCount[] {
  const counts = new MinuteCounts();
  for (const { receivedAt, from, to } of changes) {
    if (from === to) continue;
    const minute = minuteOf(receivedAt);
    counts.add(minute, from, -1);
    counts.add(minute, to, 1);
  }
  // In (minute, status) order, as tally's: a store that locks a row per count takes them in one order in every commit.
  return counts.sorted();
}

export interface TrafficSeries {
  /** Start of each minute, oldest first, every minute of the range (empty minutes included). */
  readonly minutes: readonly number[];
  /** For each status seen, one count per entry of `minutes`. */
  readonly counts: Readonly<Record<string, readonly number[]>>;
  readonly total: number;
}

/**
 * One metric's counts as chart series over the minutes `[from, to)`: a
 * column per minute whatever the store returned, zero where it has nothing,
 * and always the `statuses` given (in that order) before any other seen.
 */
export function trafficSeries(rows: readonly TrafficCount[], metric: TrafficMetric, from: number, to: number, statuses: readonly string[]): TrafficSeries {
  const first = minuteOf(from);
  const minutes: number[] = [];
  for (let minute = first; minute < to; minute += MINUTE_MS) minutes.push(minute);
  const counts: Record<string, number[]> = {};
  for (const status of statuses) counts[status] = minutes.map(() => 0);
  let total = 0;
  for (const row of rows) {
    if (row.metric !== metric) continue;
    const index = (row.minute - first) / MINUTE_MS;
    if (index < 0 || index >= minutes.length) continue;
    (counts[row.status] ??= minutes.map(() => 0))[index]! += row.count;
    total += row.count;
  }
  return { minutes, counts, total };
}
