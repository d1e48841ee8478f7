import { performance } from 'node:perf_hooks';
import { orderKeyOf } from '../domain/delivery-order.js';
import { storedId } from '../domain/normalize.js';
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
  /** The longest an idle replay waits before it looks again (default IDLE_WAIT_MAX_MS; tests that move the clock by hand set less). */
  readonly idleWaitMaxMs?: number;
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
 * How often a replay that has sent its whole range so far looks again
 * while the range may still grow (its `to` is ahead, or requests
 * acknowledged before it wait for processing): no need for STEP_MS's pace.
 */
const RANGE_WAIT_MS = 200;
/**
 * The longest a replay with nothing to do waits before it looks again: a
 * replay idle at its step (its `to` ahead, its range not complete yet)
 * waits RANGE_WAIT_MS, then twice as long each time it is still idle, up to
 * this, and never past the moment `to` plus {@link RANGE_GRACE_MS} passes
 * (when it may end). Each look costs a pending count and a page read: 200
 * replays looking every 200 ms kept a server at 65% CPU with nothing to
 * send (a hostile-client review). A message arriving in the range of one
 * waiting so goes out within this long.
 */
const IDLE_WAIT_MAX_MS = 5_000;
/**
 * How long after `to` a replay waits before it reads which raw requests it
 * must see processed: ingest stamps `receivedAt` before its request's
 * commit, which can lag (a group commit, a slow fsync), and a request
 * committed after that read would be left out.
 */
export const RANGE_GRACE_MS = 2_000;

/**
 * What one step of a replay did: deliveries queued, and whether it found
 * nothing to do (it has nothing pending, and waits for its range to be
 * complete or has read every message stored so far without one to send).
 */
interface StepResult {
  readonly queued: number;
  readonly idle: boolean;
}

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
  /**
   * Per running replay whose `to` has passed: what its range waits for (see
   * {@link rangeHorizon}), and the seq past which none of its messages lies
   * once the range is complete (see {@link rangeEnd}).
   */
  private readonly ranges = new Map<string, { readonly rawMark: number; horizon?: number; end?: number }>();
  /**
   * Per running replay that found nothing to do at its last step: when
   * (performance.now()) it looks again, and how long it waited (see
   * IDLE_WAIT_MAX_MS). Such a replay has nothing pending.
   */
  private readonly idle = new Map<string, { readonly dueAt: number; readonly waitMs: number }>();

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
      let state: PassState = 'idle';
      try {
        this.window = nextReplayWindow(this.window, lateMs);
        do {
          this.again = false;
          state = await this.pass();
        } while (this.again && !this.stopped);
      } catch (error) {
        this.replays = undefined;
        this.options.onError(error);
      } finally {
        this.running = undefined;
        if (state !== 'busy') this.window = REPLAY_WINDOW.start;
        this.schedule(state === 'busy' ? STEP_MS : state === 'waiting' ? this.idleWait() : this.options.pollMs);
      }
    })();
  }

  /** How long until the first idle replay is due again; at most pollMs, to read the running replays again. */
  private idleWait(): number {
    let dueAt = performance.now() + this.options.pollMs;
    for (const entry of this.idle.values()) dueAt = Math.min(dueAt, entry.dueAt);
    return Math.max(STEP_MS, dueAt - performance.now());
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    const dueAt = performance.now() + ms;
    this.timer = setTimeout(() => this.kick(Math.max(0, performance.now() - dueAt)), ms);
    this.timer.unref();
  }

  /**
   * One step of every running replay; resolves `busy` while one has more to
   * send, `waiting` when all wait for their range to be complete, `idle`
   * when none is running.
   */
  private async pass(): Promise<PassState> {
    const { store, pollMs } = this.options;
    if (this.replays === undefined || performance.now() - this.readAt >= pollMs) {
      this.replays = await store.listRunningReplays();
      this.readAt = performance.now();
      for (const id of this.ranges.keys()) if (!this.replays.some((replay) => replay.id === id)) this.ranges.delete(id);
      for (const id of this.idle.keys()) if (!this.replays.some((replay) => replay.id === id)) this.idle.delete(id);
    }
    if (this.replays.length === 0) return 'idle';
    // Replays that found nothing to do wait their turn, costing nothing meanwhile (they have nothing pending).
    const at = performance.now();
    const replays = this.replays.filter((replay) => (this.idle.get(replay.id)?.dueAt ?? 0) <= at);
    if (replays.length === 0) return 'waiting';
    // One window for all of this node's replays, the oldest served first.
    const pending: number[] = [];
    for (const replay of replays) pending.push(await store.countPendingReplayDeliveries(replay.id));
    let free = this.window - pending.reduce((sum, n) => sum + n, 0);
    let busy = false;
    for (const [index, replay] of replays.entries()) {
      if (this.stopped) break;
      const room = Math.min(PAGE, Math.max(0, free));
      if (pending[index]! > 0 && room < MIN_ROOM) {
        busy = true;
        continue;
      }
      const step = await this.step(replay, pending[index]!, room);
      free -= step.queued;
      if (step.idle) this.backOff(replay);
      else {
        this.idle.delete(replay.id);
        busy = true;
      }
    }
    return busy ? 'busy' : 'waiting';
  }

  /** A replay found nothing to do: it looks again later, each time later still (see IDLE_WAIT_MAX_MS). */
  private backOff(replay: ReplayRecord): void {
    const before = this.idle.get(replay.id);
    const waitMs = Math.min(this.options.idleWaitMaxMs ?? IDLE_WAIT_MAX_MS, before === undefined ? RANGE_WAIT_MS : before.waitMs * 2);
    const at = performance.now();
    // Not past when it may end (the clock of `to` is the runner's now(); the wait is measured on performance.now()).
    const untilEnd = replay.to + RANGE_GRACE_MS - this.options.now();
    if (untilEnd > 0 && untilEnd < waitMs) {
      // Then its range completes within moments (requests still processing): look soon again.
      this.idle.set(replay.id, { dueAt: at + untilEnd, waitMs: RANGE_WAIT_MS / 2 });
    } else {
      this.idle.set(replay.id, { dueAt: at + waitMs, waitMs });
    }
  }

  /**
   * Queues up to `room` deliveries of one replay, or ends it once it has
   * sent its whole range and the range is complete (see {@link rangeHorizon}).
   */
  private async step(replay: ReplayRecord, pending: number, room: number): Promise<StepResult> {
    const { store, directory, suppressions, now } = this.options;
    const filters = directory.webhookFilters(replay.sourceId);
    // Without a selection nearly every message goes out: read no more than fit (bodies are most of a step's cost).
    const selective = replay.types !== undefined || replay.events !== undefined || filters.length > 0;
    let limit = selective ? PAGE : room;
    let page = room === 0 ? [] : await this.readPage(replay, limit);
    // Nothing settled past the cursor yet, but writers running now may add some: look again next step.
    if (page === undefined) return { queued: 0, idle: false };
    if (room > 0 && pastRange(page, replay.to)) {
      if (pending > 0) return { queued: 0, idle: false };
      const horizon = await this.rangeHorizon(replay);
      if (horizon === undefined) return { queued: 0, idle: true };
      // Seqs need not follow receivedAt (nodes commit side by side): a
      // message of the range may lie past this page, anywhere up to the horizon.
      const settled = await store.settledMessageSeq();
      const end = settled.seq >= horizon ? await this.rangeEnd(replay, horizon) : horizon;
      limit = PAGE;
      page = await store.listMessagesAfter(replay.sourceId, replay.cursor, limit, Math.min(settled.seq, end));
      if (page.length === 0) {
        if (settled.seq < horizon) return { queued: 0, idle: true };
        await store.endReplay(replay.id, 'done', now());
        this.replays = undefined;
        this.ranges.delete(replay.id);
        return { queued: 0, idle: false };
      }
      // Else queue what of it is in the range, and move the cursor past the rest, as for any page.
    }
    // Subjects name ids as ingest stores them; an older SQLite message's userId may still hold U+0000.
    const keep = (message: StoredMessage): boolean =>
      message.userId === undefined || suppressions.regulationFor(replay.sourceId, storedId(message.userId)) === undefined;
    const picked = pickReplayPage(page, room, replay, filters, keep);
    if (picked === undefined) return { queued: 0, idle: false };
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
      return { queued: 0, idle: false };
    }
    const deliveries = picked.seqs.length * targets.destinations.length;
    this.replays = this.replays?.map((r) => (r.id === replay.id ? { ...r, cursor: picked.toCursor, queued: r.queued + deliveries } : r));
    // Read to the end of what is stored and found none to send (a replay whose `to` is ahead, following live traffic it does not select): idle.
    return { queued: deliveries, idle: deliveries === 0 && pending === 0 && page.length < limit };
  }

  /**
   * Up to `limit` of the replay's source's messages after its cursor, read
   * only up to the settled seq: where a seq can commit after a higher one
   * (PostgreSQL), a cursor moved past it would never come back for it.
   * Undefined when none is settled past the cursor yet but writers running
   * now may still add some.
   */
  private async readPage(replay: ReplayRecord, limit: number): Promise<StoredMessage[] | undefined> {
    const { store } = this.options;
    const settled = await store.settledMessageSeq();
    // Nor past the range's last message once that is known (see rangeEnd).
    const end = this.ranges.get(replay.id)?.end ?? Number.MAX_SAFE_INTEGER;
    const page = await store.listMessagesAfter(replay.sourceId, replay.cursor, limit, Math.min(settled.seq, end));
    return settled.settling && page.length === 0 ? undefined : page;
  }

  /**
   * The seq below which every message of the replay's range lies, once the
   * range is complete; undefined until then. Until `to` has passed (and
   * {@link RANGE_GRACE_MS} after it) a message of the range may still
   * arrive. Ingest answers 200 once a request is stored raw, and processing
   * makes its messages later, so then every raw request acknowledged before
   * `to` must also be processed: each has a seq no higher than the highest
   * unprocessed one read once `to` had passed (`highestRawSeq`), kept per
   * replay so that requests arriving later, outside the range, are not
   * waited for. Once those are processed, the highest message seq bounds
   * their messages. (With several nodes, `receivedAt` comes from each
   * node's clock: a request taken within their skew of `to` may fall
   * either side.)
   */
  private async rangeHorizon(replay: ReplayRecord): Promise<number | undefined> {
    const { store, now } = this.options;
    if (now() < replay.to + RANGE_GRACE_MS) return undefined;
    let range = this.ranges.get(replay.id);
    if (range === undefined) {
      range = { rawMark: await store.highestRawSeq() };
      this.ranges.set(replay.id, range);
    }
    if (range.horizon === undefined) {
      if (range.rawMark !== 0 && (await store.hasRawRequestsUpTo(range.rawMark))) return undefined;
      range.horizon = await store.highestMessageSeq();
    }
    return range.horizon;
  }

  /**
   * The seq past which no message of the replay's range lies, once the
   * range is complete and every seq up to `horizon` is settled: the highest
   * of the range stored then (0: none), read by the index on receivedAt.
   * Every message of the range has a seq no higher than `horizon` (see
   * {@link rangeHorizon}) and, settled, is visible to that read; so the
   * replay stops there rather than read every later message up to
   * `horizon` (all of the source's history after the range, for an old one).
   */
  private async rangeEnd(replay: ReplayRecord, horizon: number): Promise<number> {
    const range = this.ranges.get(replay.id)!;
    range.end ??= Math.min(horizon, (await this.options.store.replayRangeSeqs(replay.sourceId, replay.from, replay.to))?.last ?? 0);
    return range.end;
  }
}

/** What a pass of the runner found: a replay with more to send, replays that only wait for their range, or none running. */
type PassState = 'busy' | 'waiting' | 'idle';

/** Whether a page read after a replay's cursor holds nothing of its range: every message arrived at or after `to` (or none is left). */
function pastRange(page: readonly StoredMessage[], to: number): boolean {
  return page.every((message) => message.receivedAt >= to);
}

/**
 * The ordering key of each picked message (a replay always keeps each key's
 * order), named as ingest stores ids (storedId, as orderKeyOf does): a
 * message stored before ingest replaced U+0000 may still hold one.
 */
function orderKeysOf(page: readonly StoredMessage[], seqs: readonly number[]): Array<string | undefined> {
  const bySeq = new Map(page.map((message) => [message.seq, message]));
  return seqs.map((seq) => {
    const message = bySeq.get(seq);
    if (message === undefined) return undefined;
    return message.userId === undefined ? orderKeyOf(JSON.parse(message.body) as unknown) : storedId(message.userId);
  });
}
