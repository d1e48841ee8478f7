/**
 * A sliding one-second window for one receiver's `maxRequestsPerSecond`:
 * at most `limit` sends in any window `(t - 1000 ms, t]`.
 *
 * It hands out send times rather than yes/no answers: the last `limit`
 * granted times are kept in a ring, and the next send may go 1,000 ms after
 * the one `limit` places before it. Grants never go backwards, so every send
 * is at least a second after the one `limit` places earlier, which is
 * exactly the sliding-window bound. Pure: the caller passes the clock.
 */
export class RateWindow {
  private readonly granted: number[];
  /** Index of the oldest of the last `limit` grants. */
  private oldest = 0;

  constructor(readonly limit: number) {
    this.granted = new Array<number>(limit).fill(Number.NEGATIVE_INFINITY);
  }

  /**
   * Reserves the earliest send time at or after `now`, unless it is more
   * than `maxWaitMs` away: then nothing is reserved and this returns
   * undefined (the caller puts the work back for later).
   */
  reserve(now: number, maxWaitMs: number): number | undefined {
    const at = Math.max(now, this.granted[this.oldest]! + 1000);
    if (at - now > maxWaitMs) return undefined;
    this.granted[this.oldest] = at;
    this.oldest = (this.oldest + 1) % this.limit;
    return at;
  }

  /** When a send could next be reserved (≥ `now`). */
  nextFree(now: number): number {
    return Math.max(now, this.granted[this.oldest]! + 1000);
  }
}
