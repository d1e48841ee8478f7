import { DEDUPLICATION_WINDOW_MS } from '../domain/message.js';
import type { AppendResult, IngestEntry, Store } from '../store/store.js';

interface Waiter {
  readonly entries: readonly IngestEntry[];
  readonly bytes: number;
  readonly resolve: (results: AppendResult[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The backlog is full: the entries were not queued, so nothing of them is
 * stored and the client may safely send them again.
 */
export class BacklogFullError extends Error {
  override readonly name = 'BacklogFullError';
}

/**
 * Shares commits between concurrent requests: entries handed in while a
 * commit is under way (or within the same event-loop turn) go into the next
 * one, a single transaction. Each caller's promise settles when its own
 * entries are committed, so a 200 still means "stored".
 *
 * The queue is bounded (admission control): when requests arrive faster than
 * the store commits, the queue, and every request object, parsed body and
 * socket buffer waiting on it, would otherwise grow without limit until the
 * process runs out of memory. Past the bound, commit() refuses at once.
 */
export class GroupCommitter {
  private queue: Waiter[] = [];
  private queuedEntries = 0;
  private queuedBytes = 0;
  private committing = false;
  private scheduled = false;

  constructor(
    private readonly store: Store,
    private readonly options: {
      readonly now: () => number;
      /** A commit takes at most this many entries; the rest wait for the next. */
      readonly maxEntries: number;
      /** Entries waiting past which commit() refuses new ones. */
      readonly maxBacklog: number;
      /** The same bound in message bytes (JSON text), for big messages. */
      readonly maxBacklogBytes: number;
      /** The same bound in requests, for many small ones (each holds its request and reply). */
      readonly maxBacklogRequests: number;
      readonly onCommit?: (entries: number, durationMs: number) => void;
    },
  ) {}

  /**
   * Queues the entries for the next commit. Rejects with
   * {@link BacklogFullError}, without queuing anything, when they would take
   * the backlog past its bound; an empty queue takes anything, so that no
   * request is refused for its size alone.
   */
  commit(entries: readonly IngestEntry[]): Promise<AppendResult[]> {
    if (entries.length === 0) return Promise.resolve([]);
    let bytes = 0;
    for (const entry of entries) bytes += entry.body.length;
    if (
      this.queue.length > 0 &&
      (this.queue.length >= this.options.maxBacklogRequests ||
        this.queuedEntries + entries.length > this.options.maxBacklog ||
        this.queuedBytes + bytes > this.options.maxBacklogBytes)
    ) {
      return Promise.reject(new BacklogFullError(`the commit backlog is full (${this.queuedEntries} messages waiting)`));
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ entries, bytes, resolve, reject });
      this.queuedEntries += entries.length;
      this.queuedBytes += bytes;
      this.schedule();
    });
  }

  /**
   * Whether the backlog is at its bound, so that a request can be refused
   * before its body is even read and parsed.
   */
  get full(): boolean {
    return (
      this.queue.length >= this.options.maxBacklogRequests ||
      this.queuedEntries >= this.options.maxBacklog ||
      this.queuedBytes >= this.options.maxBacklogBytes
    );
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
    let bytes = 0;
    let taken = 0;
    while (taken < this.queue.length) {
      const waiter = this.queue[taken]!;
      if (taken > 0 && count + waiter.entries.length > this.options.maxEntries) break;
      count += waiter.entries.length;
      bytes += waiter.bytes;
      taken++;
    }
    this.queuedEntries -= count;
    this.queuedBytes -= bytes;
    return this.queue.splice(0, taken);
  }

  /** Entries waiting for a commit (a gauge for /metrics). */
  get backlog(): number {
    return this.queuedEntries;
  }
}
