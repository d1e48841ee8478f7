import type { IngestStore, RawBacklog } from '../store/store.js';

/**
 * The second admission bound of ingest: raw requests stored but not yet
 * processed into messages. Ingest's 200 no longer waits for processing, so
 * when requests arrive faster than the processing stage turns them into
 * messages for long, this backlog would grow without limit; past
 * `maxMessages`, ingest answers 503 `overloaded` as it does when its commit
 * backlog is full.
 *
 * Read from the store every `pollMs` (so every node's raw rows count on a
 * shared store), plus what this process committed since the last read, so
 * that a burst between two reads cannot overshoot the bound by more than a
 * read's worth of another node's traffic.
 */
export class ProcessingBacklog {
  private last: RawBacklog = { requests: 0, messages: 0, oldestReceivedAt: undefined };
  private addedSinceRead = 0;
  private timer: NodeJS.Timeout | undefined;
  private reading = false;

  constructor(
    private readonly store: Pick<IngestStore, 'rawBacklog'>,
    private readonly options: { readonly maxMessages: number; readonly pollMs: number; readonly onError: (error: unknown) => void },
  ) {}

  async start(): Promise<void> {
    await this.read();
    this.timer = setInterval(() => void this.read(), this.options.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** This process committed raw requests holding `count` messages. */
  added(count: number): void {
    this.addedSinceRead += count;
  }

  /** Unprocessed messages, as of the last read plus this process's commits since. */
  get messages(): number {
    return this.last.messages + this.addedSinceRead;
  }

  /** How long the oldest unprocessed request has waited, as of the last read (0 when none). */
  lagMs(now: number): number {
    return this.last.oldestReceivedAt === undefined ? 0 : Math.max(0, now - this.last.oldestReceivedAt);
  }

  get full(): boolean {
    return this.messages >= this.options.maxMessages;
  }

  private async read(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      const added = this.addedSinceRead;
      this.last = await this.store.rawBacklog();
      // Commits that landed while the read ran may or may not be in it; counting them twice errs on the safe side only until the next read.
      this.addedSinceRead -= added;
    } catch (error) {
      this.options.onError(error);
    } finally {
      this.reading = false;
    }
  }
}
