import { DEDUPLICATION_WINDOW_MS } from '../domain/message.js';
import type { AppendResult, IngestEntry, Store } from '../store/store.js';

interface Waiter {
  readonly entries: readonly IngestEntry[];
  readonly resolve: (results: AppendResult[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Shares commits between concurrent requests: entries handed in while a
 * commit is under way (or within the same event-loop turn) go into the next
 * one, a single transaction. Each caller's promise settles when its own
 * entries are committed, so a 200 still means "stored".
 */
export class GroupCommitter {
  private queue: Waiter[] = [];
  private queuedEntries = 0;
  private committing = false;
  private scheduled = false;

  constructor(
    private readonly store: Store,
    private readonly options: {
      readonly now: () => number;
      /** A commit takes at most this many entries; the rest wait for the next. */
      readonly maxEntries: number;
      readonly onCommit?: (entries: number, durationMs: number) => void;
    },
  ) {}

  commit(entries: readonly IngestEntry[]): Promise<AppendResult[]> {
    if (entries.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      this.queue.push({ entries, resolve, reject });
      this.queuedEntries += entries.length;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.committing || this.scheduled) return;
    this.scheduled = true;
    // setImmediate: requests parsed in this turn join the same commit.
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.committing || this.queue.length === 0) return;
    this.committing = true;
    const batch = this.takeBatch();
    const entries = batch.flatMap((w) => w.entries);
    const started = performance.now();
    try {
      const results = await this.store.appendMessages(entries, this.options.now() - DEDUPLICATION_WINDOW_MS);
      this.options.onCommit?.(entries.length, performance.now() - started);
      let offset = 0;
      for (const waiter of batch) {
        waiter.resolve(results.slice(offset, offset + waiter.entries.length));
        offset += waiter.entries.length;
      }
    } catch (error) {
      for (const waiter of batch) waiter.reject(error);
    } finally {
      this.committing = false;
      if (this.queue.length > 0) this.schedule();
    }
  }

  /** Whole requests, up to maxEntries (always at least one request). */
  private takeBatch(): Waiter[] {
    let count = 0;
    let taken = 0;
    while (taken < this.queue.length) {
      const size = this.queue[taken]!.entries.length;
      if (taken > 0 && count + size > this.options.maxEntries) break;
      count += size;
      taken++;
    }
    this.queuedEntries -= count;
    return this.queue.splice(0, taken);
  }

  /** Entries waiting for a commit (a gauge for /metrics). */
  get backlog(): number {
    return this.queuedEntries;
  }
}
