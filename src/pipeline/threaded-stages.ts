import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { sharedWriteLocks } from '../store/sqlite/write-lock.js';
import type { HeldCircuit } from '../domain/circuits.js';
import type { BackgroundStages } from './background-stages.js';
import type { FromStageThread, MetricsSnapshot, StageThreadData, ToStageThread } from './stage-protocol.js';

/** A scrape waits this long for the stage thread's metrics, then serves its last snapshot; a read of its circuits, then says nothing of them. */
const METRICS_WAIT_MS = 1_000;
/** A crashed stage thread is started again after this pause (it only ever works from the store). */
const RESTART_AFTER_MS = 1_000;
/**
 * Starts in a row that may fail (the thread ends before it says ready)
 * before the process gives up: ingest alone would acknowledge messages
 * nobody processes, so then the server stops loudly for its supervisor.
 */
const START_ATTEMPTS = 3;

/**
 * The main thread's handle on the background stages running in the stage
 * thread (`stage-thread.ts`). Wake-ups and metrics cross by message; data
 * crosses only through the store. A thread that dies is logged loudly and
 * started again: everything it had claimed falls due again when its leases
 * end, so nothing is lost.
 */
export class ThreadedStages implements BackgroundStages {
  private worker: Worker | undefined;
  /** The worker once it said ready, until it exits. */
  private ready: Worker | undefined;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private nextMetricsId = 0;
  private readonly metricsWaiters = new Map<number, (metrics: MetricsSnapshot) => void>();
  private lastMetrics: MetricsSnapshot = [];
  private nextCircuitsId = 0;
  private readonly circuitsWaiters = new Map<number, (circuits: readonly HeldCircuit[]) => void>();
  private stopped: (() => void) | undefined;

  private constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  /**
   * Resolves once the stage thread has opened its store and started every
   * stage; rejects when it could not, {@link START_ATTEMPTS} times in a row.
   */
  static async start(config: Config, logger: Logger): Promise<ThreadedStages> {
    const stages = new ThreadedStages(config, logger);
    await stages.spawnWithRetries();
    return stages;
  }

  /** Whether the stage thread is up and its stages started (`/readyz` says not ready otherwise). */
  running(): boolean {
    return this.ready !== undefined && this.ready === this.worker;
  }

  private async spawnWithRetries(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.spawn();
        return;
      } catch (error) {
        if (attempt >= START_ATTEMPTS || this.stopping) throw error;
        this.logger.error({ err: error, attempt }, `the stage thread did not start; trying again in ${RESTART_AFTER_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, RESTART_AFTER_MS));
        if (this.stopping) throw error;
      }
    }
  }

  private spawn(): Promise<void> {
    const data: StageThreadData = { config: this.config, logLevel: this.logger.level, sqliteWriteLocks: sharedWriteLocks() };
    const worker = new Worker(new URL('./stage-thread.js', import.meta.url), { workerData: data, name: 'switchyard-stages' });
    this.worker = worker;
    return new Promise((resolve, reject) => {
      let ready = false;
      worker.on('message', (message: FromStageThread) => {
        switch (message.type) {
          case 'ready':
            ready = true;
            this.ready = worker;
            resolve();
            break;
          case 'metrics':
            this.lastMetrics = message.metrics;
            this.metricsWaiters.get(message.id)?.(message.metrics);
            this.metricsWaiters.delete(message.id);
            break;
          case 'circuits':
            this.circuitsWaiters.get(message.id)?.(message.circuits);
            this.circuitsWaiters.delete(message.id);
            break;
          case 'stopped':
            break;
        }
      });
      worker.on('error', (error) => {
        this.logger.error({ err: error }, 'the stage thread (delivery, deletions, replays, Engage) failed');
      });
      worker.on('exit', (code) => {
        if (this.worker === worker) this.worker = undefined;
        if (this.ready === worker) this.ready = undefined;
        if (this.stopping) this.stopped?.();
        if (!ready) {
          reject(new Error(`the stage thread exited with code ${code} before it started`));
          return;
        }
        if (this.stopping) return;
        this.logger.error({ code }, `the stage thread exited; starting it again in ${RESTART_AFTER_MS} ms`);
        this.restartTimer = setTimeout(() => {
          if (this.stopping) return;
          this.spawnWithRetries().catch((error: unknown) => {
            if (this.stopping) return; // stopped while it was being started again
            // Ingest alone would acknowledge messages nobody delivers: better to stop loudly.
            this.logger.fatal({ err: error }, 'the stage thread cannot start again; exiting');
            process.exit(1);
          });
        }, RESTART_AFTER_MS);
      });
    });
  }

  private post(message: ToStageThread): void {
    this.worker?.postMessage(message);
  }

  wakeRegulations(): void {
    this.post({ type: 'wake', stage: 'regulations' });
  }

  wakeReplays(): void {
    this.post({ type: 'wake', stage: 'replays' });
  }

  engageDefinitionsChanged(): void {
    this.post({ type: 'wake', stage: 'engage' });
  }

  /** The stage thread's metrics now, or its last snapshot when it does not answer in time. */
  async metrics(): Promise<MetricsSnapshot> {
    if (this.worker === undefined) return this.lastMetrics;
    const id = this.nextMetricsId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.metricsWaiters.delete(id);
        resolve(this.lastMetrics);
      }, METRICS_WAIT_MS);
      this.metricsWaiters.set(id, (metrics) => {
        clearTimeout(timer);
        resolve(metrics);
      });
      this.post({ type: 'metrics', id });
    });
  }

  /** The circuits the stage thread's delivery worker holds now; undefined when it does not answer within {@link METRICS_WAIT_MS} (nothing is known then). */
  async circuits(): Promise<readonly HeldCircuit[] | undefined> {
    if (this.worker === undefined) return undefined;
    const id = this.nextCircuitsId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.circuitsWaiters.delete(id);
        resolve(undefined);
      }, METRICS_WAIT_MS);
      this.circuitsWaiters.set(id, (circuits) => {
        clearTimeout(timer);
        resolve(circuits);
      });
      this.post({ type: 'circuits', id });
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (worker === undefined) return;
    const exited = new Promise<void>((resolve) => {
      this.stopped = resolve;
    });
    worker.postMessage({ type: 'stop' } satisfies ToStageThread);
    await exited;
  }
}
