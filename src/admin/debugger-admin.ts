import type { MessageStatus } from '../domain/message.js';
import { ApiError } from '../errors.js';
import type { Store, StoredMessage } from '../store/store.js';
import { limitParam } from './validate.js';

/**
 * One message as the debugger shows it. `seq` is also the stream's event id,
 * so a client can load the list and then stream on from its newest entry.
 */
export interface DebuggerEntry {
  readonly seq: number;
  readonly receivedAt: string;
  /** The call type; null for a rejected message that had none. */
  readonly type: string | null;
  readonly status: MessageStatus;
  readonly reason?: string;
  /** The stored message, parsed. */
  readonly message: unknown;
  /** The transformation that ran on it: `{id, name, version, logs}`. */
  readonly transformation?: unknown;
}

export const DEFAULT_DEBUGGER_LIMIT = 50;
export const MAX_DEBUGGER_LIMIT = 500;

/**
 * The JSON text of {@link viewMessage}, for the live stream. The stored body
 * is spliced in as it is rather than parsed and serialized again: ingest
 * stores the output of JSON.stringify, and at full ingest rate the round trip
 * was most of what a watching debugger cost. A body that does not look like
 * that (no object, or raw line breaks, which would also break the event's
 * framing) takes the parsing path.
 */
export function entryJson(stored: StoredMessage): string {
  const body = stored.body;
  if (body.charCodeAt(0) !== 0x7b || body.charCodeAt(body.length - 1) !== 0x7d || body.includes('\n') || body.includes('\r')) {
    return JSON.stringify(viewMessage(stored));
  }
  const reason = stored.reason === undefined ? '' : `,"reason":${JSON.stringify(stored.reason)}`;
  const receivedAt = new Date(stored.receivedAt).toISOString();
  // Written by the transform stage with JSON.stringify: no raw line breaks.
  const transformation = stored.transform === undefined ? '' : `,"transformation":${stored.transform}`;
  return `{"seq":${stored.seq},"receivedAt":"${receivedAt}","type":${JSON.stringify(stored.type ?? null)},"status":"${stored.status}"${reason},"message":${body}${transformation}}`;
}

export function viewMessage(stored: StoredMessage): DebuggerEntry {
  let message: unknown;
  try {
    message = JSON.parse(stored.body);
  } catch {
    // Ingest stores JSON text only; show anything else as it is rather than fail the whole list.
    message = stored.body;
  }
  return {
    seq: stored.seq,
    receivedAt: new Date(stored.receivedAt).toISOString(),
    type: stored.type ?? null,
    status: stored.status,
    ...(stored.reason !== undefined && { reason: stored.reason }),
    message,
    ...(stored.transform !== undefined && { transformation: JSON.parse(stored.transform) as unknown }),
  };
}

/** A source's debugger: its most recent messages with what ingest decided. Shared by the admin routes and the CLI. */
export class DebuggerAdmin {
  constructor(private readonly store: Store) {}

  /** Newest first, `limit` from 1 to 500 (default 50). */
  async list(sourceId: string, query: { limit?: unknown }): Promise<{ messages: DebuggerEntry[] }> {
    const limit = limitParam(query.limit, DEFAULT_DEBUGGER_LIMIT, MAX_DEBUGGER_LIMIT);
    await this.requireSource(sourceId);
    return { messages: (await this.store.listRecentMessages(sourceId, limit)).map(viewMessage) };
  }

  /**
   * One of the source's messages by its seq (the `messageSeq` of its
   * deliveries), as it is now: with the transformation that ran on it since
   * the stream sent it.
   */
  async get(sourceId: string, seq: unknown): Promise<DebuggerEntry> {
    const n = typeof seq === 'string' && /^\d{1,15}$/.test(seq) ? Number(seq) : NaN;
    if (!Number.isSafeInteger(n) || n < 1) throw new ApiError('invalid_request', 'seq must be a message seq (a positive integer)');
    await this.requireSource(sourceId);
    const [stored] = await this.store.getMessagesBySeq([n]);
    // Another source's message is not found here either: the route names the source.
    if (stored === undefined || stored.sourceId !== sourceId) {
      throw new ApiError('not_found', `no message ${n} in source ${JSON.stringify(sourceId.slice(0, 60))}: it may have passed the retention period or been erased`);
    }
    return viewMessage(stored);
  }

  /**
   * Where a stream starts: after `lastEventId` (the `Last-Event-ID` header of
   * a reconnecting client) or, without one, after the newest message now.
   */
  async streamCursor(sourceId: string, lastEventId: unknown): Promise<number> {
    let cursor: number | undefined;
    if (lastEventId !== undefined && lastEventId !== '') {
      cursor = typeof lastEventId === 'string' && /^\d{1,15}$/.test(lastEventId) ? Number(lastEventId) : NaN;
      if (!Number.isSafeInteger(cursor)) throw new ApiError('invalid_request', 'Last-Event-ID must be the id of an event (a message seq)');
    }
    await this.requireSource(sourceId);
    // From the newest message: one whose transaction is still running with a
    // lower seq arrived before the client connected. (Starting from the
    // settled seq instead would replay what committed before, all of it
    // while that seq is still unknown.)
    return cursor ?? (await this.store.listRecentMessages(sourceId, 1))[0]?.seq ?? 0;
  }

  async requireSource(sourceId: string): Promise<void> {
    if ((await this.store.getSource(sourceId)) === undefined) {
      throw new ApiError('not_found', `no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
    }
  }
}
