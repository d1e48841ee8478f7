import type { Database, Statement, Transaction } from 'better-sqlite3';
import type { MessageStatus } from '../../domain/message.js';
import type { AppendResult, IngestEntry, StoredMessage } from '../store.js';
import { type MessageRow, toStoredMessage } from '../rows.js';
import { destinationScope } from '../../domain/delivery-order.js';
import { DeliveryOrder } from './delivery-order.js';
import { DedupeIndex } from './dedupe-index.js';
import { MessageKeyIndex } from './message-keys.js';
import type { TrafficQueries } from './traffic-queries.js';

const PRUNE_BATCH = 2_000;

/** Ingest's writes and the debugger's reads of the `messages` table. */
export class MessageQueries {
  /** Built from the stored messages before the first append; see {@link DedupeIndex}. */
  private dedupe: DedupeIndex | undefined;
  private readonly acceptedRow: Statement<[number], [string, string | null, number, string]>;
  private readonly acceptedFrom: Statement<[number], [number, string, string, number]>;
  private readonly firstSeqFrom: Statement<[number], [number, number]>;
  private readonly insertMessage: Statement<unknown[]>;
  private readonly insertDelivery: Statement<[string, number, string, string, number, number, number]>;
  private readonly insertOrdered: Statement<[string, number, string, string, number | null, number | null, number, number]>;
  private readonly order: DeliveryOrder;
  private readonly keys: MessageKeyIndex;
  private readonly recent: Statement<[string, number], MessageRow>;
  private readonly after: Statement<[string, number, number, number], MessageRow>;
  private readonly countAfter: Statement<[string, number]>;
  private readonly countBetween: Statement<[string, number, number]>;
  private readonly appendAll: Transaction<(entries: readonly IngestEntry[], dedupeSince: number) => AppendResult[]>;

  constructor(
    private readonly db: Database,
    private readonly traffic: TrafficQueries,
  ) {
    this.acceptedRow = db.prepare(`SELECT source_id, message_id, received_at, status FROM messages WHERE seq = ?`).raw() as Statement<
      [number],
      [string, string | null, number, string]
    >;
    this.acceptedFrom = db
      .prepare(`SELECT seq, source_id, message_id, received_at FROM messages WHERE seq >= ? AND status = 'accepted' AND message_id IS NOT NULL`)
      .raw() as Statement<[number], [number, string, string, number]>;
    this.firstSeqFrom = db.prepare(`SELECT seq, received_at FROM messages WHERE seq >= ? ORDER BY seq LIMIT 1`).raw() as Statement<
      [number],
      [number, number]
    >;
    this.insertMessage = db.prepare(`
      INSERT INTO messages (source_id, status, reason, type, message_id, user_id, received_at, body, traceparent)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.insertDelivery = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`);
    // An ordered delivery with an earlier one of its key still open waits
    // behind it: no next attempt (not claimable) until that one ends.
    this.insertOrdered = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, after_id, created_at, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
    this.order = new DeliveryOrder(db);
    this.keys = new MessageKeyIndex(db);
    this.recent = db.prepare(`SELECT * FROM messages WHERE source_id = ? ORDER BY seq DESC LIMIT ?`);
    this.after = db.prepare(`SELECT * FROM messages WHERE source_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`);
    this.countAfter = db.prepare(`SELECT count(*) FROM messages WHERE source_id = ? AND seq > ?`).pluck();
    this.countBetween = db.prepare(`SELECT count(*) FROM messages WHERE source_id = ? AND seq > ? AND seq < ?`).pluck();
    this.appendAll = db.transaction((entries: readonly IngestEntry[], dedupeSince: number) => {
      const results = entries.map((entry) => this.appendOne(entry, dedupeSince));
      this.traffic.add(
        'messages',
        results.map((result, i) => ({ at: entries[i]!.receivedAt, status: result.status })),
      );
      return results;
    });
  }

  append(entries: readonly IngestEntry[], dedupeSince: number): AppendResult[] {
    return this.appendAll.immediate(entries, dedupeSince);
  }

  /** {@link append} inside the caller's transaction (the processing of raw requests). */
  appendInTransaction(entries: readonly IngestEntry[], dedupeSince: number): AppendResult[] {
    return this.appendAll(entries, dedupeSince);
  }

  private appendOne(entry: IngestEntry, dedupeSince: number): AppendResult {
    const { sourceId, messageId } = entry;
    if (entry.status !== 'accepted' || messageId === undefined) return { seq: this.insert(entry, entry.status), status: entry.status };
    const index = (this.dedupe ??= this.rebuildDedupeIndex(dedupeSince));
    const sameMessage = (seq: number): boolean => {
      const row = this.acceptedRow.get(seq);
      return row !== undefined && row[0] === sourceId && row[1] === messageId && row[2] >= dedupeSince && row[3] === 'accepted';
    };
    if (index.seen(sourceId, messageId, dedupeSince, sameMessage)) return { seq: this.insert(entry, 'duplicate'), status: 'duplicate' };
    const seq = this.insert(entry, 'accepted');
    index.add(sourceId, messageId, entry.receivedAt, seq);
    return { seq, status: 'accepted' };
  }

  /** Builds the de-duplication index now, if it is not built yet (it takes about 1.5 s per million messages in the window). */
  prepareDedupeIndex(since: number): void {
    this.dedupe ??= this.rebuildDedupeIndex(since);
  }

  /** Indexes the messages accepted since `since`, reading from the first one received then. */
  private rebuildDedupeIndex(since: number): DedupeIndex {
    const index = new DedupeIndex();
    for (const [seq, sourceId, messageId, receivedAt] of this.acceptedFrom.iterate(this.firstSeqReceivedSince(since))) {
      if (receivedAt >= since) index.add(sourceId, messageId, receivedAt, seq);
    }
    return index;
  }

  /**
   * Binary search over seq: messages are appended in order of arrival, so
   * received_at grows with seq (but for clock steps, which only move the
   * boundary by their size).
   */
  private firstSeqReceivedSince(since: number): number {
    const first = this.firstSeqFrom.get(0);
    if (first === undefined) return 0;
    let low = first[0];
    let high = (this.db.prepare(`SELECT MAX(seq) FROM messages`).pluck().get() as number) + 1;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      const [seq, receivedAt] = this.firstSeqFrom.get(middle)!; // middle <= MAX(seq)
      if (receivedAt >= since) high = middle;
      else low = seq + 1;
    }
    return low;
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
        entry.traceparent ?? null,
      ).lastInsertRowid,
    );
    this.keys.noteInserted(seq);
    if (status === 'accepted') {
      for (const destination of entry.destinations) {
        // A transformed destination's delivery waits for the transform stage
        // (not claimable); ordered, it takes its place in its key's chain now
        // and the transform stage decides when it falls due.
        const status = entry.transforming === true && destination === 'webhooks' ? 'transforming' : 'pending';
        const key = destination === 'webhooks' ? entry.orderKey : undefined;
        if (key === undefined) {
          this.insertDelivery.run(entry.sourceId, seq, destination, status, entry.receivedAt, entry.receivedAt, entry.receivedAt);
          continue;
        }
        const scope = destinationScope(entry.sourceId);
        const before = this.order.before(scope, key);
        const at = entry.receivedAt;
        const id = Number(this.insertOrdered.run(entry.sourceId, seq, destination, status, before === undefined ? at : null, before ?? null, at, at).lastInsertRowid);
        this.order.append(scope, key, id);
      }
    }
    return seq;
  }

  listRecent(sourceId: string, limit: number): StoredMessage[] {
    return this.recent.all(sourceId, limit).map(toStoredMessage);
  }

  listAfter(sourceId: string, afterSeq: number, limit: number, uptoSeq: number): StoredMessage[] {
    return this.after.all(sourceId, afterSeq, uptoSeq, limit).map(toStoredMessage);
  }

  highestSeq(): number {
    return this.db.prepare(`SELECT coalesce(max(seq), 0) FROM messages`).pluck().get() as number;
  }

  count(sourceId: string, afterSeq: number, beforeSeq: number | undefined): number {
    const count = beforeSeq === undefined ? this.countAfter.get(sourceId, afterSeq) : this.countBetween.get(sourceId, afterSeq, beforeSeq);
    return count as number;
  }

  /** Deletes one batch of old rows per table; returns how many rows went. */
  pruneBatch(before: number): number {
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
    return removed + this.order.pruneEnded(PRUNE_BATCH);
  }
}
