import type { Database, Statement } from 'better-sqlite3';
import type { OrderPlace } from '../../domain/delivery-order.js';

/**
 * Ordered delivery on SQLite (see docs/architecture.md, "Ordered
 * delivery"). Every write runs under the one write lock, so a delivery's
 * link and its predecessor's outcome never race: whichever commits first is
 * seen by the other.
 */
export class DeliveryOrder {
  private readonly tail: Statement<[string, string], { delivery_id: number }>;
  private readonly open: Statement<[number], { one: number }>;
  private readonly moveTail: Statement<[string, string, number]>;
  private readonly release: Statement<[number, number, number]>;
  private readonly waiting: Statement<[], { one: number }>;
  private readonly pruneTails: Statement<[number]>;
  private readonly tailNames: Statement<[string, string, number], { one: number }>;
  private readonly successor: Statement<[number, number], { one: number }>;
  private readonly relinkWaiting: Statement<[number | null, number | null, number, number]>;
  private readonly relinkTransforming: Statement<[number | null, number]>;
  private readonly tailTo: Statement<[number, string, string, number]>;
  private readonly tailGone: Statement<[string, string, number]>;

  constructor(db: Database) {
    this.tail = db.prepare(`SELECT delivery_id FROM delivery_tails WHERE scope = ? AND order_key = ?`);
    // Not final yet: waiting to be sent (or sent again), or for its transformation.
    this.open = db.prepare(`SELECT 1 AS one FROM deliveries WHERE id = ? AND status IN ('pending', 'transforming')`);
    this.moveTail = db.prepare(`
      INSERT INTO delivery_tails (scope, order_key, delivery_id) VALUES (?, ?, ?)
      ON CONFLICT (scope, order_key) DO UPDATE SET delivery_id = excluded.delivery_id`);
    this.release = db.prepare(`
      UPDATE deliveries SET next_attempt_at = ?, updated_at = ?
      WHERE after_id = ? AND status = 'pending' AND next_attempt_at IS NULL`);
    // The partial index deliveries_waiting holds exactly these rows.
    this.waiting = db.prepare(`SELECT 1 AS one FROM deliveries WHERE status = 'pending' AND next_attempt_at IS NULL LIMIT 1`);
    this.pruneTails = db.prepare(`
      DELETE FROM delivery_tails WHERE (scope, order_key) IN (
        SELECT t.scope, t.order_key FROM delivery_tails t LEFT JOIN deliveries d ON d.id = t.delivery_id
        WHERE d.id IS NULL OR d.status NOT IN ('pending', 'transforming') LIMIT ?)`);
    this.tailNames = db.prepare(`SELECT 1 AS one FROM delivery_tails WHERE scope = ? AND order_key = ? AND delivery_id = ?`);
    // Two indexed lookups: deliveries_waiting, deliveries_transforming_after.
    this.successor = db.prepare(`
      SELECT 1 AS one FROM deliveries WHERE after_id = ? AND status = 'pending' AND next_attempt_at IS NULL
      UNION ALL SELECT 1 FROM deliveries WHERE after_id = ? AND status = 'transforming' LIMIT 1`);
    this.relinkWaiting = db.prepare(`
      UPDATE deliveries SET after_id = ?, next_attempt_at = ?, updated_at = ?
      WHERE after_id = ? AND status = 'pending' AND next_attempt_at IS NULL`);
    this.relinkTransforming = db.prepare(`UPDATE deliveries SET after_id = ? WHERE after_id = ? AND status = 'transforming'`);
    this.tailTo = db.prepare(`UPDATE delivery_tails SET delivery_id = ? WHERE scope = ? AND order_key = ? AND delivery_id = ?`);
    this.tailGone = db.prepare(`DELETE FROM delivery_tails WHERE scope = ? AND order_key = ? AND delivery_id = ?`);
  }

  /**
   * The key's latest delivery in the scope, while it has no final outcome
   * (`pending`, or `transforming`): the new delivery waits behind it. Two
   * primary-key reads.
   */
  before(scope: string, key: string): number | undefined {
    const tail = this.tail.get(scope, key)?.delivery_id;
    return tail !== undefined && this.isOpen(tail) ? tail : undefined;
  }

  /** Whether the delivery is there without its final outcome: what waits behind it keeps waiting. */
  isOpen(id: number): boolean {
    return this.open.get(id) !== undefined;
  }

  /** Records the new delivery as the key's latest in the scope. */
  append(scope: string, key: string, id: number): void {
    this.moveTail.run(scope, key, id);
  }

  /**
   * Whether the delivery is part of a key's chain: it waits for one, its
   * key's tail names it, or one waits for it. (A delivery of a destination
   * without ordering has none of these.)
   */
  isChained(id: number, afterId: number | null, place: OrderPlace | undefined): boolean {
    if (afterId !== null) return true;
    if (place !== undefined && this.tailNames.get(place.scope, place.key, id) !== undefined) return true;
    return this.successor.get(id, id) !== undefined;
  }

  /**
   * A delivery that leaves its key's order unsent (its transformation
   * dropped the message, or failed on it) hands its place to its
   * predecessor `afterId`: what waited for it (pending, or still
   * transforming) waits for that one instead (due at `at` when that one is
   * final, gone, or there is none), and the key's tail naming it names that
   * one (or goes, when it no longer holds anyone back).
   */
  passOn(goneId: number, afterId: number | null, place: OrderPlace | undefined, at: number): void {
    const open = afterId !== null && this.isOpen(afterId);
    this.relinkWaiting.run(afterId, open ? null : at, at, goneId);
    this.relinkTransforming.run(afterId, goneId);
    if (place === undefined) return;
    if (open && afterId !== null) this.tailTo.run(afterId, place.scope, place.key, goneId);
    else this.tailGone.run(place.scope, place.key, goneId);
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

  /** Whether any delivery waits behind another (see {@link releaseAfter}). */
  anyWaiting(): boolean {
    return this.waiting.get() !== undefined;
  }

  /** Makes the delivery waiting behind `endedId` (if any) due at `at`; resolves how many. */
  releaseAfter(endedId: number, at: number): number {
    return this.release.run(at, at, endedId).changes;
  }
}
