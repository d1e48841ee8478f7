/**
 * The contract between the delivery benches and their child processes
 * (lib/delivery-receiver.ts, lib/delivery-poster.ts, lib/delivery-sender.ts).
 * Each child gets one JSON argument and writes one JSON object per line to
 * stdout. Times are epoch milliseconds with a fractional part
 * (`performance.timeOrigin + performance.now()`), comparable across the
 * processes of one machine.
 */
import type { LatencySummary } from './latency-histogram.js';

/** Path the receiver counts POSTs on; everything under /_bench/ is control. */
export const HOOK_PATH = '/hook';

/** `POST /_bench/reset` on the receiver: starts a new phase, counting from zero. */
export interface ReceiverReset {
  readonly phase: string;
  /** Counts at which to report the exact arrival time (`mark` lines). */
  readonly marks: readonly number[];
  /** Parse each body and record `now - properties.sentAtMs` for messages with `properties.benchPhase === 'measured'`. */
  readonly latency: boolean;
  /** Latencies above this count as slow in `perSecond` (latency phases only). */
  readonly slowMs?: number;
  /**
   * What a latency phase times: `messages` (default) as above; `engage-syncs`
   * the computed-trait identify messages Switchyard sends (`context.personas`
   * set), timed by their trait `bench_sent_at_ms` (the send time of the
   * measured message that changed it); every other POST is counted, not timed.
   */
  readonly latencyOf?: 'messages' | 'engage-syncs';
}

export type ReceiverLine =
  | { readonly event: 'listening'; readonly port: number }
  /** Every PROGRESS_MS while a phase runs, whether or not anything arrived. */
  | { readonly event: 'progress'; readonly phase: string; readonly count: number; readonly at: number }
  | { readonly event: 'mark'; readonly phase: string; readonly count: number; readonly at: number };

/** `GET /_bench/stats`. */
export interface ReceiverStats {
  readonly phase: string;
  readonly count: number;
  /** POSTs that carried an X-Signature header. */
  readonly signed: number;
  readonly firstAt: number | undefined;
  readonly lastAt: number | undefined;
  /** Messages of the measured part, latency phases only. */
  readonly measured: number;
  /** Send to arrival, ms, of the measured messages. */
  readonly latencyMs: LatencySummary;
  /**
   * `engage-syncs` only: send to the sync's `timestamp` (the moment Engage
   * computed the change), ms: the part of `latencyMs` before delivery.
   */
  readonly computedMs?: LatencySummary;
  /**
   * The measured messages by the second (from the first one) they were sent
   * in: how many, how many took longer than `slowMs`, and the slowest. Shows
   * whether a bad p99 is one stall or a steady state.
   */
  readonly perSecond: ReadonlyArray<{ readonly second: number; readonly messages: number; readonly slow: number; readonly maxMs: number }>;
  readonly cpuSec: number;
}

/** Arguments of lib/delivery-poster.ts, the bare-undici baseline. */
export interface PosterArgs {
  readonly url: string;
  readonly count: number;
  readonly concurrency: number;
  readonly idPrefix: string;
  readonly receivedAt: number;
  readonly sharedSecret: string;
  readonly userAgent: string;
}

export type PosterLine =
  | { readonly event: 'ready'; readonly prepareSec: number }
  | {
      readonly event: 'done';
      readonly ok: number;
      readonly non2xx: number;
      readonly errors: number;
      readonly firstError: string | undefined;
      readonly elapsedSec: number;
      readonly cpuSec: number;
    }
  | { readonly event: 'error'; readonly message: string };

/**
 * What a process in Switchyard's place (the poster, the store floor) counts
 * of its POSTs and reports when done: answers by class, errors, and its CPU
 * and time from the moment it is created.
 */
export class PostTally {
  private ok = 0;
  private non2xx = 0;
  private errors = 0;
  private firstError: string | undefined;
  private readonly cpuBefore = process.cpuUsage();
  private readonly started = performance.now();

  /** A status code, or the error that ended the POST. */
  record(answer: unknown): void {
    if (typeof answer === 'number') {
      if (answer >= 200 && answer < 300) this.ok += 1;
      else this.non2xx += 1;
      return;
    }
    this.errors += 1;
    this.firstError ??= answer instanceof Error ? answer.message : String(answer);
  }

  /** The `done` line, timed up to now. */
  done(): Extract<PosterLine, { event: 'done' }> {
    const cpu = process.cpuUsage(this.cpuBefore);
    const { ok, non2xx, errors, firstError } = this;
    return { event: 'done', ok, non2xx, errors, firstError, elapsedSec: (performance.now() - this.started) / 1000, cpuSec: (cpu.user + cpu.system) / 1e6 };
  }
}

/** Arguments of lib/delivery-sender.ts, the paced Tracking API client. */
export interface SenderArgs {
  readonly url: string;
  readonly authorization: string;
  readonly ratePerSec: number;
  readonly warmupSec: number;
  readonly durationSec: number;
  readonly idPrefix: string;
  readonly connections: number;
  /** userIds cycle through `user-0` … `user-<users - 1>` (default 5,000, as the ingest payload does). */
  readonly users?: number;
  /**
   * A heavy user (engage.latency.heavy-user): every message is this user's,
   * with a new `coupon` each (distinct values), tagged `benchPhase: "heavy"`
   * so that no receiver times it.
   */
  readonly heavyUser?: string;
  /**
   * engage.latency.spread: like `heavyUser`, untimed messages with a new
   * `coupon` each, but cycling through this many other users
   * (`other-0` …): the heavy user's load without the heavy user.
   */
  readonly spreadUsers?: number;
}

export type SenderLine =
  | { readonly event: 'measuring' }
  | {
      readonly event: 'result';
      readonly sentWarmup: number;
      readonly sentMeasured: number;
      /** 2xx answers to measured messages: the ones the receiver must see. */
      readonly okMeasured: number;
      readonly non2xx: number;
      readonly errors: number;
      readonly firstError: string | undefined;
      /** How far the sender fell behind its schedule at worst, ms. */
      readonly maxScheduleLagMs: number;
      readonly ingestLatencyMs: LatencySummary;
      readonly cpuSec: number;
    }
  | { readonly event: 'error'; readonly message: string };

/** Epoch milliseconds with sub-millisecond resolution. */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}
