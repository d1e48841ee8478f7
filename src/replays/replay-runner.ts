import { isReplayed } from '../domain/replay.js';
import type { SuppressionList } from '../regulations/suppression-list.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { ReplayRecord, Store } from '../store/store.js';

export interface ReplayRunnerOptions {
  readonly store: Store;
  readonly directory: SourceDirectory;
  readonly suppressions: SuppressionList;
  readonly now: () => number;
  /** How often to look for replays when none is running (or one was created on another node). */
  readonly pollMs: number;
  readonly onError: (error: unknown) => void;
}

/** Stored messages read per page. */
const PAGE = 200;
/**
 * A replay queues more only while fewer of its deliveries than this are
 * pending. Live deliveries are claimed oldest-due first, so at most this many
 * replayed ones are ever ahead of a live message in the queue: the pace that
 * keeps live latency, while a fast receiver still gets thousands a second.
 */
const MAX_PENDING = 200;
/** Pause between pages while a replay is running. */
const STEP_MS = 20;

/**
 * Queues the deliveries of running replays, a page at a time, in seq order
 * (the order messages were stored, which is receivedAt order on one node).
 * All its progress is in the store (a cursor per replay, moved in the
 * transaction that queues the page), so a restart resumes where it stopped,
 * and of several nodes only one queues each page.
 */
export class ReplayRunner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly options: ReplayRunnerOptions) {}

  start(): void {
    this.schedule(0);
  }

  /** Looks at running replays now (one was just created), or once more after the current pass. */
  wake(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = (async () => {
      let busy = false;
      try {
        do {
          this.again = false;
          busy = await this.pass();
        } while (this.again && !this.stopped);
      } catch (error) {
        this.options.onError(error);
      } finally {
        this.running = undefined;
        this.schedule(busy ? STEP_MS : this.options.pollMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.wake(), ms);
    this.timer.unref();
  }

  /** One step of every running replay; resolves whether any is still running. */
  private async pass(): Promise<boolean> {
    const replays = await this.options.store.listRunningReplays();
    for (const replay of replays) {
      if (this.stopped) break;
      await this.step(replay);
    }
    return replays.length > 0;
  }

  private async step(replay: ReplayRecord): Promise<void> {
    const { store, directory, suppressions, now } = this.options;
    const pending = await store.countPendingReplayDeliveries(replay.id);
    if (pending >= MAX_PENDING) return;
    const page = await store.listMessagesAfter(replay.sourceId, replay.cursor, Math.min(PAGE, MAX_PENDING - pending));
    // Past the range: every message of the page arrived at or after `to`.
    if (page.length === 0 || page.every((message) => message.receivedAt >= replay.to)) {
      if (pending === 0) await store.endReplay(replay.id, 'done', now());
      return;
    }
    const filters = directory.webhookFilters(replay.sourceId);
    const seqs = page
      .filter((message) => isReplayed(message, replay, filters))
      .filter((message) => message.userId === undefined || suppressions.regulationFor(replay.sourceId, message.userId) === undefined)
      .map((message) => message.seq);
    await store.queueReplayPage({
      replayId: replay.id,
      sourceId: replay.sourceId,
      fromCursor: replay.cursor,
      toCursor: page[page.length - 1]!.seq,
      messageSeqs: seqs,
      receivers: replay.receivers,
      at: now(),
    });
  }
}
