import type { Database, Statement } from 'better-sqlite3';

/**
 * Messages indexed at once in message_keys: a batch costs 1-2 ms inside the
 * transaction that reaches it, and the messages not yet indexed, which a
 * search scans, stay fewer than two batches.
 */
export const MESSAGE_KEYS_BATCH = 256;

/**
 * The message_keys token text of a message, as SQL over `messages`: `m` and
 * the hex of its messageId, `u` and the hex of its userId (see
 * delivery-queries.ts `messageKey`, which makes the tokens searched for).
 */
const KEYS_OF = `concat_ws(' ', CASE WHEN message_id <> '' THEN 'm' || hex(message_id) END, CASE WHEN user_id <> '' THEN 'u' || hex(user_id) END)`;

/**
 * Keeps message_keys (the FTS5 table that finds messages by messageId and
 * userId) in step with `messages`, a batch at a time: FTS5 writes one
 * segment per transaction, so indexing each message in the transaction that
 * stores it cost 25-45 µs more per message when commits hold a few
 * messages (processing at low rates, Engage's syncs). Every message up to
 * `message_keys_state.indexed_seq` is indexed; a search also scans the few
 * after it ({@link UNINDEXED_SEQS}).
 *
 * {@link noteInserted} runs in the transaction of every message insert: once
 * `MESSAGE_KEYS_BATCH` messages wait, that transaction indexes them. It is
 * correct whichever connection inserts, because writes are serialized: the
 * stored `indexed_seq` is re-read before indexing. The copy held here is a
 * hint that only decides when to look (a rolled-back transaction can leave it
 * ahead of the table, which delays the next look by one batch at most).
 */
export class MessageKeyIndex {
  private indexedSeq = 0;
  private readonly readIndexed: Statement<[], number>;
  private readonly indexRange: Statement<[number, number]>;
  private readonly setIndexed: Statement<[number]>;

  constructor(db: Database) {
    this.readIndexed = db.prepare(`SELECT indexed_seq FROM message_keys_state WHERE id = 1`).pluck() as Statement<[], number>;
    this.indexRange = db.prepare(`
      INSERT INTO message_keys (rowid, keys) SELECT seq, ${KEYS_OF} FROM messages
      WHERE seq > ? AND seq <= ? AND (message_id <> '' OR user_id <> '')`);
    this.setIndexed = db.prepare(`UPDATE message_keys_state SET indexed_seq = ? WHERE id = 1`);
  }

  /** After a message was inserted as `seq`, in the same transaction. */
  noteInserted(seq: number): void {
    if (seq - this.indexedSeq < MESSAGE_KEYS_BATCH) return;
    const indexed = this.readIndexed.get() ?? 0;
    if (seq - indexed >= MESSAGE_KEYS_BATCH) {
      this.indexRange.run(indexed, seq);
      this.setIndexed.run(seq);
      this.indexedSeq = seq;
    } else {
      this.indexedSeq = indexed;
    }
  }
}

/** The seqs of messages not yet in message_keys, as a condition on `seq` (a search scans them). */
export const UNINDEXED_SEQS = `seq > (SELECT indexed_seq FROM message_keys_state WHERE id = 1)`;
