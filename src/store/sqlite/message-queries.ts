import { hash } from 'node:crypto';
import type { Database, Statement } from 'better-sqlite3';
import type { MessageStatus } from '../../domain/message.js';
import type { AppendResult, IngestEntry, StoredMessage } from '../store.js';
import { type MessageRow, toStoredMessage } from '../rows.js';

const PRUNE_BATCH = 2_000;
/** De-duplication keys examined per prune chunk. */
const PRUNE_SCAN = 20_000;

/** Ingest's writes and the debugger's reads of the `messages` table. */
export class MessageQueries {
  private readonly markSeen: Statement<[bigint, string, string, number, number]>;
  /** Where the chunked scan of expired de-duplication keys goes on from. */
  private dedupeCursor: bigint | undefined;
  private readonly insertMessage: Statement<unknown[]>;
  private readonly insertDelivery: Statement<[string, number, string, number, number, number]>;
  private readonly recent: Statement<[string, number], MessageRow>;
  private readonly after: Statement<[string, number, number], MessageRow>;
  private readonly countAfter: Statement<[string, number]>;
  private readonly countBetween: Statement<[string, number, number]>;
  private readonly appendAll: (entries: readonly IngestEntry[], dedupeSince: number) => AppendResult[];

  constructor(private readonly db: Database) {
    // The upsert changes a row exactly when the message is new: no key, an
    // expired key, or (a hash collision) a key of another message.
    this.markSeen = db.prepare(`
      INSERT INTO dedupe_keys (key, source_id, message_id, seen_at) VALUES (?, ?, ?, ?)
      ON CONFLICT (key) DO UPDATE SET source_id = excluded.source_id, message_id = excluded.message_id, seen_at = excluded.seen_at
      WHERE dedupe_keys.seen_at < ? OR dedupe_keys.message_id != excluded.message_id OR dedupe_keys.source_id != excluded.source_id`);
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
      const key = dedupeKey(entry.sourceId, entry.messageId);
      const fresh = this.markSeen.run(key, entry.sourceId, entry.messageId, entry.receivedAt, dedupeSince).changes > 0;
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

  /**
   * Deletes one chunk of expired de-duplication keys, scanning the table in
   * key order from where the previous call stopped (there is no index by
   * age); a full pass ends when the scan wraps around.
   */
  private pruneDedupeChunk(before: number): number {
    const rows = this.db
      .prepare(`SELECT key, seen_at FROM dedupe_keys WHERE key > ? ORDER BY key LIMIT ?`)
      .safeIntegers(true)
      .all(this.dedupeCursor ?? -(2n ** 63n), PRUNE_SCAN) as Array<{ key: bigint; seen_at: bigint }>;
    this.dedupeCursor = rows.length < PRUNE_SCAN ? undefined : rows.at(-1)!.key;
    const expired = rows.filter((row) => row.seen_at < BigInt(before)).map((row) => row.key.toString());
    if (expired.length === 0) return 0;
    return this.db.prepare(`DELETE FROM dedupe_keys WHERE key IN (SELECT CAST(value AS INTEGER) FROM json_each(?))`).run(JSON.stringify(expired)).changes;
  }

  /** True while a chunked pass over the de-duplication keys is under way. */
  get pruneInProgress(): boolean {
    return this.dedupeCursor !== undefined;
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
    removed += this.pruneDedupeChunk(dedupeBefore);
    return removed;
  }
}

/** The first 64 bits of SHA-256 over the source and message ids, as a signed SQLite integer. */
function dedupeKey(sourceId: string, messageId: string): bigint {
  return hash('sha256', `${sourceId}\u0000${messageId}`, 'buffer').readBigInt64BE(0);
}

