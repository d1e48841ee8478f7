import { type DestinationFilter, applyFilters } from './destination-filters.js';
import { isJsonObject } from './message.js';
import { type DeliveryTarget, functionTarget } from './routing.js';

/** What a replay re-delivers, as its request and the store keep it. */
export interface ReplaySelection {
  readonly from: number;
  readonly to: number;
  readonly types: readonly string[] | undefined;
  /** Only tracks with these event names (with `types`, other types still pass when listed). */
  readonly events: readonly string[] | undefined;
}

/**
 * How far ahead of the server's time a replay's `to` may be. A replay runs
 * until its `to` has passed (messages of its range may still arrive until
 * then), so a `to` far ahead would have it follow live traffic for as long.
 */
export const MAX_REPLAY_AHEAD_MS = 24 * 3_600_000;

/**
 * How many replays may be running at once, on one source and in all (every
 * node of a shared PostgreSQL counts as one: the store counts). Each
 * running replay costs its runner a pending count and a page read per step;
 * 200 at once kept a server at 65% CPU with nothing to send (a
 * hostile-client review). A cancelled or finished replay frees its place.
 */
export const MAX_RUNNING_REPLAYS = { perSource: 10, total: 50 } as const;

/** A stored message as a replay looks at it. */
export interface ReplayCandidate {
  readonly status: string;
  readonly type: string | undefined;
  readonly receivedAt: number;
  readonly body: string;
}

/**
 * Whether a stored message goes out again: it was `accepted` or `filtered`,
 * received in `[from, to)`, of a listed type, a track with a listed event
 * when `events` is given, and it passes the destination's filters as they
 * are now. Suppressed users are the caller's check (it holds the list).
 */
export function isReplayed(message: ReplayCandidate, selection: ReplaySelection, filters: readonly DestinationFilter[]): boolean {
  if (message.status !== 'accepted' && message.status !== 'filtered') return false;
  if (message.receivedAt < selection.from || message.receivedAt >= selection.to) return false;
  if (selection.types !== undefined && (message.type === undefined || !selection.types.includes(message.type))) return false;
  if (selection.events === undefined && filters.length === 0) return true;
  const parsed: unknown = JSON.parse(message.body);
  if (!isJsonObject(parsed)) return false;
  if (selection.events !== undefined) {
    if (message.type !== 'track' || typeof parsed['event'] !== 'string' || !selection.events.includes(parsed['event'])) return false;
  }
  return applyFilters(filters, parsed).kind === 'pass';
}

/**
 * How many of its deliveries a node's replays may have pending at once (the
 * window), and how it moves. The replay runner steps every few milliseconds
 * on the thread that also delivers (and, with `--workers 0`, ingests): when
 * its timer fires late, that thread is busy, and live messages wait in the
 * same queue of work, so the window halves; while its timer fires on time,
 * the window grows by a little each step. Live traffic so keeps the thread
 * it needs, and a replay takes what is left.
 *
 * `max` stays below an origin's in-flight slots (64 by default), so a
 * replay's POSTs never hold every slot of a receiver: a live POST to it
 * never waits behind them. It also bounds how many replayed deliveries, due
 * earlier, can be ahead of a live one in the queue.
 */
export const REPLAY_WINDOW = {
  min: 4,
  max: 48,
  start: 8,
  /** Added per on-time step. */
  grow: 2,
  /** A step whose timer fired later than this counts as late. */
  lateMs: 8,
} as const;

/** The window after one step whose timer fired `lateMs` late (AIMD). */
export function nextReplayWindow(window: number, lateMs: number): number {
  if (lateMs > REPLAY_WINDOW.lateMs) return Math.max(REPLAY_WINDOW.min, Math.floor(window / 2));
  return Math.min(REPLAY_WINDOW.max, window + REPLAY_WINDOW.grow);
}

/** A page of stored messages as the replay runner reads it. */
export interface ReplayPageCandidate extends ReplayCandidate {
  readonly seq: number;
  readonly userId?: string | undefined;
}

/**
 * What one step queues from a page read in seq order: the seqs that go out
 * again (at most `room`), and the cursor to move to, the last seq looked
 * at. When `room` fills up, the cursor stops at the message that filled it,
 * so the rest of the page is read again next step; messages passed over
 * (not replayed) never count against `room`, so a replay of few events
 * moves through history a page at a time. `keep` is the caller's check of
 * everything but the selection (suppressed users).
 */
export function pickReplayPage<M extends ReplayPageCandidate>(
  page: readonly M[],
  room: number,
  selection: ReplaySelection,
  filters: readonly DestinationFilter[],
  keep: (message: M) => boolean,
): { readonly seqs: number[]; readonly toCursor: number } | undefined {
  const seqs: number[] = [];
  let toCursor: number | undefined;
  for (const message of page) {
    if (seqs.length >= room) break;
    toCursor = message.seq;
    if (isReplayed(message, selection, filters) && keep(message)) seqs.push(message.seq);
  }
  return toCursor === undefined ? undefined : { seqs, toCursor };
}

/**
 * Where a replay's `receivers` send it: receiver URLs of the Webhooks
 * destination and function destination ids (`fn_…`; a URL always has a
 * scheme, so the two never mix up). Without `receivers`: the Webhooks
 * destination, every receiver. Function ids only: no Webhooks delivery.
 */
export function replayTargets(receivers: readonly string[] | undefined): { destinations: DeliveryTarget[]; receiverUrls: readonly string[] | undefined } {
  if (receivers === undefined) return { destinations: ['webhooks'], receiverUrls: undefined };
  const functions = receivers.filter(isFunctionReceiver).map(functionTarget);
  const urls = receivers.filter((receiver) => !isFunctionReceiver(receiver));
  return urls.length === 0 ? { destinations: functions, receiverUrls: undefined } : { destinations: ['webhooks', ...functions], receiverUrls: urls };
}

/** A replay receiver naming a function destination by its id rather than a receiver URL. */
export function isFunctionReceiver(receiver: string): boolean {
  return receiver.startsWith('fn_');
}
