import type { Database, Statement } from 'better-sqlite3';

/**
 * Ordered delivery on SQLite (see docs/architecture.md, "Ordered
 * delivery"). Every write runs under the one write lock, so a delivery's
 * link and its predecessor's outcome never race: whichever commits first is
 * seen by the other.
 */
export class DeliveryOrder {
  private readonly tail: Statement<[string, string], { delivery_id: number }>;
  private readonly pending: Statement<[number], { one: number }>;
  private readonly moveTail: Statement<[string, string, number]>;
  private readonly release: Statement<[number, number, number]>;
  private readonly pruneTails: Statement<[number]>;

  constructor(db: Database) {
    this.tail = db.prepare(`SELECT delivery_id FROM delivery_tails WHERE scope = ? AND order_key = ?`);
    this.pending = db.prepare(`SELECT 1 AS one FROM deliveries WHERE id = ? AND status = 'pending'`);
    this.moveTail = db.prepare(`
      INSERT INTO delivery_tails (scope, order_key, delivery_id) VALUES (?, ?, ?)
      ON CONFLICT (scope, order_key) DO UPDATE SET delivery_id = excluded.delivery_id`);
    this.release = db.prepare(`
      UPDATE deliveries SET next_attempt_at = ?, updated_at = ?
      WHERE after_id = ? AND status = 'pending' AND next_attempt_at IS NULL`);
    this.pruneTails = db.prepare(`
      DELETE FROM delivery_tails WHERE (scope, order_key) IN (
        SELECT t.scope, t.order_key FROM delivery_tails t LEFT JOIN deliveries d ON d.id = t.delivery_id
        WHERE d.id IS NULL OR d.status NOT IN ('pending', 'transforming') LIMIT ?)`);
  }

  /**
   * The key's latest delivery in the scope, while it has no final outcome:
   * the new delivery waits behind it. Two primary-key reads.
   */
  before(scope: string, key: string): number | undefined {
    const tail = this.tail.get(scope, key)?.delivery_id;
    return tail !== undefined && this.pending.get(tail) !== undefined ? tail : undefined;
  }

  /** Records the new delivery as the key's latest in the scope. */
  append(scope: string, key: string, id: number): void {
    this.moveTail.run(scope, key, id);
  }

  /**
   * Forgets up to `limit` keys whose latest delivery has its final outcome
   * (or is gone, with its source or by retention): such a tail holds nobody
   * back, and without this the table kept a row for every key ever seen.
   * A key's next delivery then finds no tail, which {@link before} already
   * reads as "nothing to wait for".
   */
  pruneEnded(limit: number): number {
    return this.pruneTails.run(limit).changes;
  }

  /** Makes the delivery waiting behind `endedId` (if any) due at `at`; resolves how many. */
  releaseAfter(endedId: number, at: number): number {
    return this.release.run(at, at, endedId).changes;
  }
}
