import { performance } from 'node:perf_hooks';
import { orderKeyOf } from '../domain/delivery-order.js';
import { REPLAY_WINDOW, nextReplayWindow, pickReplayPage, replayTargets } from '../domain/replay.js';
import type { SuppressionList } from '../regulations/suppression-list.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { SettingsCheck } from '../domain/webhook-settings.js';

/** A destination with a transformation gets replayed messages transformed again, with the version attached now. */
function transformed(check: SettingsCheck | undefined): boolean {
  return check?.ok === true && check.settings.transformation !== undefined;
}
import type { ReplayRecord, StoredMessage, Store } from '../store/store.js';

export interface ReplayRunnerOptions {
  readonly store: Store;
  readonly directory: SourceDirectory;
  readonly suppressions: SuppressionList;
  readonly now: () => number;
  /**
   * How often to look for replays when none is running, and to read the
   * running ones again (one created or cancelled on another node).
   */
  readonly pollMs: number;
  readonly onError: (error: unknown) => void;
}

/** Stored messages read per page when a replay selects some (of which at most the window's room is queued). */
const PAGE = 200;
/** Pause between steps while a replay is running; a step's lateness paces the replay (see REPLAY_WINDOW). */
const STEP_MS = 10;
/**
 * A step queues only once this much of the window is free (or nothing is
 * pending): fewer, larger commits, so the replay takes the write lock less often.
 */
const MIN_ROOM = 4;

/**
 * Queues the deliveries of running replays, a page at a time, in seq order
 * (the order messages were stored, which is receivedAt order on one node).
 * All its progress is in the store (a cursor per replay, moved in the
 * transaction that queues the page), so a restart resumes where it stopped,
 * and of several nodes only one queues each page.
 *
 * Paced so live traffic keeps its latency: the replays of a node have at
 * most a window of deliveries pending (4 to 48), which halves whenever the
 * runner's own timer fires late (the thread is busy) and grows while it
 * fires on time (see `nextReplayWindow`).
 */
export class ReplayRunner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private window: number = REPLAY_WINDOW.start;
  /**
   * The running replays as last read, with the cursors this node moved
   * since; undefined: read them again. Kept between steps so that a step
   * does not count every replay's delivered and failed deliveries.
   */
  private replays: ReplayRecord[] | undefined;
  private readAt = 0;

  constructor(private readonly options: ReplayRunnerOptions) {}

  start(): void {
    this.schedule(0);
  }

  /** Looks at running replays now (one was just created), or once more after the current pass. */
  wake(): void {
    this.replays = undefined;
    this.kick(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Runs passes now; `lateMs`: how late the timer that called it fired. */
  private kick(lateMs: number): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = (async () => {
      let busy = false;
      try {
        this.window = nextReplayWindow(this.window, lateMs);
        do {
          this.again = false;
          busy = await this.pass();
        } while (this.again && !this.stopped);
      } catch (error) {
        this.replays = undefined;
        this.options.onError(error);
      } finally {
        this.running = undefined;
        if (!busy) this.window = REPLAY_WINDOW.start;
        this.schedule(busy ? STEP_MS : this.options.pollMs);
      }
    })();
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    const dueAt = performance.now() + ms;
    this.timer = setTimeout(() => this.kick(Math.max(0, performance.now() - dueAt)), ms);
    this.timer.unref();
  }

  /** One step of every running replay; resolves whether any is still running. */
  private async pass(): Promise<boolean> {
    const { store, pollMs } = this.options;
    if (this.replays === undefined || performance.now() - this.readAt >= pollMs) {
      this.replays = await store.listRunningReplays();
      this.readAt = performance.now();
    }
    const replays = this.replays;
    if (replays.length === 0) return false;
    // One window for all of this node's replays, the oldest served first.
    const pending: number[] = [];
    for (const replay of replays) pending.push(await store.countPendingReplayDeliveries(replay.id));
    let free = this.window - pending.reduce((sum, n) => sum + n, 0);
    for (const [index, replay] of replays.entries()) {
      if (this.stopped) break;
      const room = Math.min(PAGE, Math.max(0, free));
      if (pending[index]! > 0 && room < MIN_ROOM) continue;
      free -= await this.step(replay, pending[index]!, room);
    }
    return true;
  }

  /** Queues up to `room` deliveries of one replay, or ends it once it is past its range; resolves how many it queued. */
  private async step(replay: ReplayRecord, pending: number, room: number): Promise<number> {
    const { store, directory, suppressions, now } = this.options;
    const filters = directory.webhookFilters(replay.sourceId);
    // Without a selection nearly every message goes out: read no more than fit (bodies are most of a step's cost).
    const selective = replay.types !== undefined || replay.events !== undefined || filters.length > 0;
    // Up to the settled seq: where a seq can commit after a higher one
    // (PostgreSQL), a cursor moved past it would never come back for it.
    const settled = room === 0 ? undefined : await store.settledMessageSeq();
    const page = settled === undefined ? [] : await store.listMessagesAfter(replay.sourceId, replay.cursor, selective ? PAGE : room, settled.seq);
    // Nothing settled past the cursor yet, but writers running now may add some: look again next step.
    if (settled?.settling === true && page.length === 0) return 0;
    // Past the range: every message of the page arrived at or after `to`.
    if (room > 0 && (page.length === 0 || page.every((message) => message.receivedAt >= replay.to))) {
      if (pending === 0) {
        await store.endReplay(replay.id, 'done', now());
        this.replays = undefined;
      }
      return 0;
    }
    const keep = (message: StoredMessage): boolean =>
      message.userId === undefined || suppressions.regulationFor(replay.sourceId, message.userId) === undefined;
    const picked = pickReplayPage(page, room, replay, filters, keep);
    if (picked === undefined) return 0;
    const targets = replayTargets(replay.receivers);
    const queued = await store.queueReplayPage({
      replayId: replay.id,
      sourceId: replay.sourceId,
      fromCursor: replay.cursor,
      toCursor: picked.toCursor,
      messageSeqs: picked.seqs,
      orderKeys: orderKeysOf(page, picked.seqs),
      receivers: targets.receiverUrls,
      destinations: targets.destinations,
      at: now(),
      transforming: transformed(directory.webhooks(replay.sourceId)?.check),
    });
    if (!queued) {
      // Cancelled, or another node queued this page: read where the replays stand.
      this.replays = undefined;
      return 0;
    }
    const deliveries = picked.seqs.length * targets.destinations.length;
    this.replays = this.replays?.map((r) => (r.id === replay.id ? { ...r, cursor: picked.toCursor, queued: r.queued + deliveries } : r));
    return deliveries;
  }
}

/** The ordering key of each picked message (a replay always keeps each key's order). */
function orderKeysOf(page: readonly StoredMessage[], seqs: readonly number[]): Array<string | undefined> {
  const bySeq = new Map(page.map((message) => [message.seq, message]));
  return seqs.map((seq) => {
    const message = bySeq.get(seq);
    if (message === undefined) return undefined;
    return message.userId ?? orderKeyOf(JSON.parse(message.body) as unknown);
  });
}
