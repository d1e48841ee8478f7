import type { IngestStore, NewRawRequest } from '../store/store.js';

interface Waiter {
  readonly request: NewRawRequest;
  readonly resolve: () => void;
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
 * Shares commits between concurrent requests: raw requests handed in while a
 * commit is under way (or within the same event-loop turn) go into the next
 * one, a single transaction (one row per request, `appendRawRequests`).
 * Each caller's promise settles when its own request is committed, so a 200
 * still means "stored"; the processing stage makes messages of it later.
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
    private readonly store: Pick<IngestStore, 'appendRawRequests'>,
    private readonly options: {
      /** A commit takes at most this many messages (whole requests, at least one); the rest wait for the next. */
      readonly maxEntries: number;
      /** Messages waiting past which commit() refuses new ones. */
      readonly maxBacklog: number;
      /** The same bound in body bytes (JSON text), for big messages. */
      readonly maxBacklogBytes: number;
      /** The same bound in requests, for many small ones (each holds its request and reply). */
      readonly maxBacklogRequests: number;
      readonly onCommit?: (entries: number, durationMs: number) => void;
    },
  ) {}

  /**
   * Queues the request for the next commit. Rejects with
   * {@link BacklogFullError}, without queuing anything, when it would take
   * the backlog past its bound; an empty queue takes anything, so that no
   * request is refused for its size alone.
   */
  commit(request: NewRawRequest): Promise<void> {
    const bytes = request.body.length;
    if (
      this.queue.length > 0 &&
      (this.queue.length >= this.options.maxBacklogRequests ||
        this.queuedEntries + request.messageCount > this.options.maxBacklog ||
        this.queuedBytes + bytes > this.options.maxBacklogBytes)
    ) {
      return Promise.reject(new BacklogFullError(`the commit backlog is full (${this.queuedEntries} messages waiting)`));
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.queuedEntries += request.messageCount;
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
    const requests = batch.map((w) => w.request);
    const started = performance.now();
    try {
      await this.store.appendRawRequests(requests);
      let messages = 0;
      for (const request of requests) messages += request.messageCount;
      this.options.onCommit?.(messages, performance.now() - started);
      for (const waiter of batch) waiter.resolve();
    } catch (error) {
      for (const waiter of batch) waiter.reject(error);
    } finally {
      this.committing = false;
      if (this.queue.length > 0) this.schedule();
    }
  }

  /** Whole requests, up to maxEntries messages (always at least one request). */
  private takeBatch(): Waiter[] {
    let count = 0;
    let bytes = 0;
    let taken = 0;
    while (taken < this.queue.length) {
      const waiter = this.queue[taken]!;
      if (taken > 0 && count + waiter.request.messageCount > this.options.maxEntries) break;
      count += waiter.request.messageCount;
      bytes += waiter.request.body.length;
      taken++;
    }
    this.queuedEntries -= count;
    this.queuedBytes -= bytes;
    return this.queue.splice(0, taken);
  }

  /** Messages waiting for a commit (a gauge for /metrics). */
  get backlog(): number {
    return this.queuedEntries;
  }
}
