import type { Database, Statement } from 'better-sqlite3';
import type { MessageStatus } from '../../domain/message.js';
import type { AppendResult, IngestEntry, StoredMessage } from '../store.js';

interface MessageRow {
  seq: number;
  source_id: string;
  status: MessageStatus;
  reason: string | null;
  type: string | null;
  message_id: string | null;
  user_id: string | null;
  received_at: number;
  body: string;
}

const PRUNE_BATCH = 2_000;

/** Ingest's writes and the debugger's reads of the `messages` table. */
export class MessageQueries {
  private readonly markSeen: Statement<[string, string, number, number]>;
  private readonly insertMessage: Statement<unknown[]>;
  private readonly insertDelivery: Statement<[string, number, string, number, number, number]>;
  private readonly recent: Statement<[string, number], MessageRow>;
  private readonly after: Statement<[string, number, number], MessageRow>;
  private readonly countAfter: Statement<[string, number]>;
  private readonly countBetween: Statement<[string, number, number]>;
  private readonly appendAll: (entries: readonly IngestEntry[], dedupeSince: number) => AppendResult[];

  constructor(private readonly db: Database) {
    // An expired key is taken over, so the upsert changes a row exactly when
    // the messageId was not seen within the window.
    this.markSeen = db.prepare(`
      INSERT INTO dedupe_keys (source_id, message_id, seen_at) VALUES (?, ?, ?)
      ON CONFLICT (source_id, message_id) DO UPDATE SET seen_at = excluded.seen_at
      WHERE dedupe_keys.seen_at < ?`);
    this.insertMessage = db.prepare(`
      INSERT INTO messages (source_id, status, reason, type, message_id, user_id, received_at, body)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
    this.insertDelivery = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at)
      VALUES (?, ?, ?, 'pending', ?, ?, ?)`);
    this.recent = db.prepare(`SELECT * FROM messages WHERE source_id = ? ORDER BY seq DESC LIMIT ?`);
    this.after = db.prepare(`SELECT * FROM messages WHERE source_id = ? AND seq > ? ORDER BY seq LIMIT ?`);
    this.countAfter = db.prepare(`SELECT count(*) FROM messages WHERE source_id = ? AND seq > ?`).pluck();
    this.countBetween = db.prepare(`SELECT count(*) FROM messages WHERE source_id = ? AND seq > ? AND seq < ?`).pluck();
    this.appendAll = db.transaction((entries: readonly IngestEntry[], dedupeSince: number) =>
      entries.map((entry) => this.appendOne(entry, dedupeSince)),
    );
  }

  append(entries: readonly IngestEntry[], dedupeSince: number): AppendResult[] {
    return this.appendAll(entries, dedupeSince);
  }

  private appendOne(entry: IngestEntry, dedupeSince: number): AppendResult {
    let status: MessageStatus = entry.status;
    if (status === 'accepted' && entry.messageId !== undefined) {
      const fresh = this.markSeen.run(entry.sourceId, entry.messageId, entry.receivedAt, dedupeSince).changes > 0;
      if (!fresh) status = 'duplicate';
    }
    return { seq: this.insert(entry, status), status };
  }

  /**
   * Stores one message as `status`, with its delivery jobs when accepted;
   * no de-duplication. Call it inside a transaction. Returns its seq.
   */
  insert(entry: IngestEntry, status: MessageStatus): number {
    const seq = Number(
      this.insertMessage.run(
        entry.sourceId,
        status,
        entry.reason ?? null,
        entry.type ?? null,
        entry.messageId ?? null,
        entry.userId ?? null,
        entry.receivedAt,
        entry.body,
      ).lastInsertRowid,
    );
    if (status === 'accepted') {
      for (const destination of entry.destinations) {
        this.insertDelivery.run(entry.sourceId, seq, destination, entry.receivedAt, entry.receivedAt, entry.receivedAt);
      }
    }
    return seq;
  }

  listRecent(sourceId: string, limit: number): StoredMessage[] {
    return this.recent.all(sourceId, limit).map(toStoredMessage);
  }

  listAfter(sourceId: string, afterSeq: number, limit: number): StoredMessage[] {
    return this.after.all(sourceId, afterSeq, limit).map(toStoredMessage);
  }

  count(sourceId: string, afterSeq: number, beforeSeq: number | undefined): number {
    const count = beforeSeq === undefined ? this.countAfter.get(sourceId, afterSeq) : this.countBetween.get(sourceId, afterSeq, beforeSeq);
    return count as number;
  }

  /** Deletes one batch of old rows per table; returns how many rows went. */
  pruneBatch(before: number, dedupeBefore: number): number {
    const finished = this.db
      .prepare(`SELECT id FROM deliveries WHERE status != 'pending' AND created_at < ? ORDER BY id LIMIT ?`)
      .pluck()
      .all(before, PRUNE_BATCH) as number[];
    let removed = 0;
    if (finished.length > 0) {
      const ids = JSON.stringify(finished);
      removed += this.db.prepare(`DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT value FROM json_each(?))`).run(ids).changes;
      removed += this.db.prepare(`DELETE FROM deliveries WHERE id IN (SELECT value FROM json_each(?))`).run(ids).changes;
    }
    removed += this.db
      .prepare(`
        DELETE FROM messages WHERE seq IN (
          SELECT seq FROM messages m WHERE received_at < ?
            AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_seq = m.seq)
          ORDER BY seq LIMIT ?)`)
      .run(before, PRUNE_BATCH).changes;
    removed += this.db
      .prepare(`
        DELETE FROM dedupe_keys WHERE (source_id, message_id) IN (
          SELECT source_id, message_id FROM dedupe_keys WHERE seen_at < ? LIMIT ?)`)
      .run(dedupeBefore, PRUNE_BATCH).changes;
    return removed;
  }
}

function toStoredMessage(row: MessageRow): StoredMessage {
  return {
    seq: row.seq,
    sourceId: row.source_id,
    status: row.status,
    reason: row.reason ?? undefined,
    type: row.type ?? undefined,
    messageId: row.message_id ?? undefined,
    userId: row.user_id ?? undefined,
    receivedAt: row.received_at,
    body: row.body,
  };
}
