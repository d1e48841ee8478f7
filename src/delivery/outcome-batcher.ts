import type { DeliveryOutcome, DeliveryQueue } from '../store/store.js';

export interface OutcomeBatcherOptions {
  /** A batch is written as soon as it has this many outcomes… */
  readonly maxBatch: number;
  /** …or this long after its first one. */
  readonly maxDelayMs: number;
  /** Called after a batch is committed (the worker learns when retries fall due). */
  /** `released`: deliveries the write made due (successors of ordered ones that ended). */
  readonly onFlushed: (outcomes: readonly DeliveryOutcome[], released: number) => void;
  readonly onError: (error: unknown) => void;
}

/** How often a batch is written before it is given up (its leases then expire and the jobs run again). */
const WRITE_TRIES = 3;
const RETRY_WRITE_MS = 200;

/**
 * Collects delivery outcomes and writes them with one `finishDeliveries` call
 * per batch: one commit for many deliveries, as ingest's group commit does.
 * One write at a time; outcomes arriving meanwhile form the next batch.
 */
export class OutcomeBatcher {
  private pending: DeliveryOutcome[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;

  constructor(
    private readonly store: Pick<DeliveryQueue, 'finishDeliveries'>,
    private readonly options: OutcomeBatcherOptions,
  ) {}

  add(outcome: DeliveryOutcome): void {
    this.pending.push(outcome);
    if (this.pending.length >= this.options.maxBatch) this.kick();
    else this.timer ??= setTimeout(() => this.kick(), this.options.maxDelayMs);
  }

  /** Writes everything added so far; resolves when it is committed (or given up). */
  async flush(): Promise<void> {
    while (this.pending.length > 0 || this.writing !== undefined) {
      this.kick();
      await this.writing;
    }
  }

  private kick(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.writing !== undefined || this.pending.length === 0) return;
    this.writing = this.writeAll().finally(() => {
      this.writing = undefined;
      // Outcomes that came in during the write go out without waiting for a timer.
      if (this.pending.length > 0) this.kick();
    });
  }

  private async writeAll(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.options.maxBatch);
      await this.write(batch);
    }
  }

  private async write(batch: DeliveryOutcome[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const released = await this.store.finishDeliveries(batch);
        this.options.onFlushed(batch, typeof released === 'number' ? released : 0);
        return;
      } catch (error) {
        if (attempt >= WRITE_TRIES) {
          this.options.onError(new Error(`could not record ${batch.length} delivery outcomes; their jobs will run again when their leases expire`, { cause: error }));
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_WRITE_MS * attempt));
      }
    }
  }
}
