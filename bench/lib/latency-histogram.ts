/**
 * Latency histogram with logarithmic buckets, about 1% wide. autocannon's
 * own histogram keeps whole milliseconds and no p95, wrk's prints a few
 * percentiles, and neither can be merged across the alternating rounds of a
 * comparison once it has crossed a process boundary; this one serializes to
 * a few hundred numbers.
 */

const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);
/** Smaller values share the first bucket: timers are not finer than this anyway. */
const FLOOR_MS = 0.01;
/** Bucket of 60 s and above; a run's timeout is shorter. */
const BUCKETS = Math.ceil(Math.log(60_000 / FLOOR_MS) / LOG_GROWTH) + 1;

/** JSON form: [bucket, count] pairs for the non-empty buckets. */
export interface SerializedHistogram {
  readonly buckets: ReadonlyArray<readonly [number, number]>;
  readonly maxMs: number;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export class LatencyHistogram {
  private readonly counts = new Float64Array(BUCKETS);
  private total = 0;
  private sum = 0;
  private maxMs = 0;

  record(ms: number, count = 1): void {
    const bucket = ms <= FLOOR_MS ? 0 : Math.min(BUCKETS - 1, Math.ceil(Math.log(ms / FLOOR_MS) / LOG_GROWTH));
    this.counts[bucket]! += count;
    this.total += count;
    this.sum += ms * count;
    if (ms > this.maxMs) this.maxMs = ms;
  }

  add(other: SerializedHistogram): void {
    for (const [bucket, count] of other.buckets) {
      const upper = upperBound(bucket);
      this.counts[Math.min(bucket, BUCKETS - 1)]! += count;
      this.total += count;
      // The exact sum is not shipped; the bucket's bound is within 1% of it.
      this.sum += upper * count;
    }
    this.maxMs = Math.max(this.maxMs, other.maxMs);
  }

  toJSON(): SerializedHistogram {
    const buckets: Array<readonly [number, number]> = [];
    this.counts.forEach((count, bucket) => {
      if (count > 0) buckets.push([bucket, count]);
    });
    return { buckets, maxMs: this.maxMs };
  }

  get count(): number {
    return this.total;
  }

  /** Latency (ms) at or below which `percent`% of the recorded values fall; 0 when empty. */
  percentile(percent: number): number {
    if (this.total === 0) return 0;
    const rank = Math.ceil((percent / 100) * this.total);
    let seen = 0;
    for (let bucket = 0; bucket < BUCKETS; bucket++) {
      seen += this.counts[bucket]!;
      if (seen >= rank) return Math.min(upperBound(bucket), this.maxMs);
    }
    return this.maxMs;
  }

  summary(): LatencySummary {
    const round = (ms: number): number => Math.round(ms * 100) / 100;
    return {
      p50: round(this.percentile(50)),
      p95: round(this.percentile(95)),
      p99: round(this.percentile(99)),
      max: round(this.maxMs),
      mean: round(this.total === 0 ? 0 : this.sum / this.total),
    };
  }
}

function upperBound(bucket: number): number {
  return FLOOR_MS * GROWTH ** bucket;
}
