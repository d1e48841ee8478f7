import type { ServerResponse } from 'node:http';
import type { Store } from '../store/store.js';
import { entryJson } from './debugger-admin.js';

/** What a stream reads: new messages after a cursor, and change notifications. */
export type StreamStore = Pick<Store, 'listMessagesAfter' | 'countMessages' | 'listRecentMessages' | 'settledMessageSeq' | 'subscribe'>;

export interface DebuggerStreamOptions {
  readonly store: StreamStore;
  readonly sourceId: string;
  /** The seq after which to start (see DebuggerAdmin.streamCursor). */
  readonly afterSeq: number;
  readonly onError: (error: unknown) => void;
}

/**
 * Live debugger streams open at once on one node. Each reads the store on
 * every commit of messages (a connection of the pool on PostgreSQL, for the
 * read's length), so their number is bounded like every other connection's
 * resources; a console tab holds one.
 */
export const MAX_DEBUGGER_STREAMS = 64;

/** Messages read per query, which bounds what one stream holds in memory. */
const PAGE = 50;
/** A reader further behind than this skips ahead to the newest messages. */
export const MAX_LAG = 1_000;
const HEARTBEAT_MS = 15_000;
/** How soon to look again while transactions running may settle more messages. */
const SETTLING_POLL_MS = 50;

/**
 * One client of `GET /sources/:id/debugger/stream`: Server-Sent Events, one
 * event per message with `id:` = its seq.
 *
 * Driven by the store's `messages` notifications (which on a shared store
 * come from every node), it pages through the messages after its cursor,
 * up to the store's settled seq: where several transactions insert
 * messages at once, one can commit after another holding a higher seq, and
 * a cursor that had passed it would never come back for it.
 * Memory stays bounded however slow the reader: nothing is queued; while the
 * socket is congested it stops reading the store and carries on from the
 * cursor on 'drain'. A reader that falls more than {@link MAX_LAG} messages
 * behind skips to the newest ones and is told how many it missed, in a
 * comment, since replaying a large backlog to a live view helps nobody.
 */
export class DebuggerStream {
  private cursor: number;
  private closed = false;
  private pumping = false;
  private again = false;
  private unsubscribe: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lookAgain: NodeJS.Timeout | undefined;
  private readonly closeListeners: Array<() => void> = [];

  constructor(
    private readonly out: ServerResponse,
    private readonly options: DebuggerStreamOptions,
  ) {
    this.cursor = options.afterSeq;
  }

  /** Sends the headers and starts following the store. */
  start(): void {
    this.out.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      // Proxies such as nginx would otherwise hold events back in their buffers.
      'x-accel-buffering': 'no',
    });
    this.out.write(': connected\n\n');
    this.out.on('close', () => this.close());
    this.out.on('drain', () => this.pump());
    this.unsubscribe = this.options.store.subscribe((topic) => {
      if (topic === 'messages') this.pump();
    });
    this.heartbeat = setInterval(() => {
      // A congested socket shows the client is still there; no need to add to it.
      if (!this.out.writableNeedDrain) this.out.write(': heartbeat\n\n');
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
    this.pump();
  }

  /** Ends the response (if still open) and stops following the store. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.lookAgain);
    this.unsubscribe?.();
    if (!this.out.writableEnded) this.out.end();
    for (const listener of this.closeListeners.splice(0)) listener();
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.closeListeners.push(listener);
  }

  /** Sends what is new, or asks for one more round after the one under way. */
  private pump(): void {
    if (this.closed) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    this.again = false;
    this.send()
      .catch((error: unknown) => {
        // A read still under way when the stream closed (the server stopping) fails on its own.
        if (!this.closed) this.options.onError(error);
        this.close();
      })
      .finally(() => {
        this.pumping = false;
        if (this.again) this.pump();
      });
  }

  private async send(): Promise<void> {
    const { store, sourceId } = this.options;
    for (;;) {
      // Congested: 'drain' pumps again, from the cursor.
      if (this.closed || this.out.writableNeedDrain) return;
      const settled = await store.settledMessageSeq();
      if (this.closed) return;
      const page = await store.listMessagesAfter(sourceId, this.cursor, PAGE, settled.seq);
      if (this.closed) return;
      const behind = page.length === PAGE && (await store.countMessages(sourceId, this.cursor, settled.seq + 1)) > MAX_LAG;
      if (behind && (await this.skipAhead(settled.seq))) continue;
      if (this.closed) return;
      // One write a page: a write a message was one syscall a message.
      let events = '';
      for (const message of page) events += `id: ${message.seq}\ndata: ${entryJson(message)}\n\n`;
      if (page.length > 0) {
        this.cursor = page.at(-1)!.seq;
        this.out.write(events);
      }
      if (page.length < PAGE) {
        // No notification comes when a running transaction ends: look again.
        if (settled.settling) this.lookAgainSoon();
        return;
      }
    }
  }

  private lookAgainSoon(): void {
    if (this.lookAgain !== undefined || this.closed) return;
    this.lookAgain = setTimeout(() => {
      this.lookAgain = undefined;
      this.pump();
    }, SETTLING_POLL_MS);
    this.lookAgain.unref();
  }

  /**
   * Moves the cursor to just before the newest page of messages (no further
   * than the settled seq), and says how many were passed over. False if it
   * did not move (nothing lies between; closed meanwhile).
   */
  private async skipAhead(settled: number): Promise<boolean> {
    const { store, sourceId } = this.options;
    const newest = await store.listRecentMessages(sourceId, PAGE);
    const first = newest.at(-1);
    if (first === undefined || this.closed) return false;
    const to = Math.min(first.seq - 1, settled);
    if (to <= this.cursor) return false;
    const skipped = await store.countMessages(sourceId, this.cursor, to + 1);
    if (this.closed) return false;
    this.cursor = to;
    this.out.write(`: skipped ${skipped} messages; this reader fell more than ${MAX_LAG} messages behind\n\n`);
    return true;
  }
}
