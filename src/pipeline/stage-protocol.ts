import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Config } from '../config.js';
import type { HeldCircuit } from '../domain/circuits.js';

/** What the stage thread is started with. */
export interface StageThreadData {
  readonly config: Config;
  /** The pino level of the main logger, so tests' silent logs stay silent. */
  readonly logLevel: string;
  /** The SQLite write locks' shared memory, by file, so both threads take turns writing (see write-lock.ts). */
  readonly sqliteWriteLocks: Map<string, SharedArrayBuffer>;
}

export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/** Main thread → stage thread. */
export type ToStageThread =
  | { readonly type: 'wake'; readonly stage: 'regulations' | 'replays' | 'engage' }
  | { readonly type: 'metrics'; readonly id: number }
  | { readonly type: 'circuits'; readonly id: number }
  | { readonly type: 'stop' };

/** Stage thread → main thread. */
export type FromStageThread =
  | { readonly type: 'ready' }
  | { readonly type: 'metrics'; readonly id: number; readonly metrics: MetricsSnapshot }
  | { readonly type: 'circuits'; readonly id: number; readonly circuits: readonly HeldCircuit[] }
  | { readonly type: 'stopped' };
