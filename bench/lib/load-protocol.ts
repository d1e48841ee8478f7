import type { SerializedHistogram } from './latency-histogram.js';
import type { PayloadSpec } from './payloads.js';

/**
 * The load of one phase of an ingest comparison, and what came of it, whichever
 * generator ran it (lib/http-load.ts picks). With autocannon, it is also the
 * contract between the runner and bench/load-worker.ts. The worker gets
 * one JSON argument and writes one JSON object per line to stdout:
 * `{"event":"measuring"}` when the warm-up is over, then either
 * `{"event":"result",...}` or `{"event":"error","message":...}`.
 */
export interface LoadArgs {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly payload: PayloadSpec;
  readonly connections: number;
  readonly warmupSec: number;
  readonly durationSec: number;
  /** Makes this run's messageIds unique among every run against the same store. */
  readonly idPrefix: string;
}

export interface LoadResult {
  /** Which load generator ran (see lib/http-load.ts). */
  readonly generator: 'wrk' | 'autocannon';
  readonly durationSec: number;
  /** Responses with a 2xx status: the only ones that count towards throughput. */
  readonly ok: number;
  readonly non2xx: number;
  /** Connection errors and timeouts (both generators count timeouts among errors). */
  readonly errors: number;
  readonly timeouts: number;
  readonly statusCodes: Readonly<Record<string, number>>;
  readonly latency: SerializedHistogram;
  /** CPU seconds the load generator spent during the measured part. */
  readonly cpuSec: number;
}

export type WorkerMessage =
  | { readonly event: 'measuring' }
  | ({ readonly event: 'result' } & LoadResult)
  | { readonly event: 'error'; readonly message: string };
