import type { Database, Statement, Transaction } from 'better-sqlite3';
import { replayScope } from '../../domain/delivery-order.js';
import { type ReplayRow, toReplayRecord } from '../rows.js';
import { DeliveryOrder } from './delivery-order.js';
import type { NewReplay, ReplayLimits, ReplayPage, ReplayRecord, ReplayRefusal } from '../store.js';

/** A replay's row with its delivered and failed counts, from its deliveries. */
const WITH_COUNTS = `
  SELECT r.*,
    (SELECT COUNT(*) FROM deliveries d WHERE d.replay_id = r.id AND d.status = 'succeeded') AS delivered,
    (SELECT COUNT(*) FROM deliveries d WHERE d.replay_id = r.id AND d.status = 'failed') AS failed
  FROM replays r`;

/** Replays: their rows, and the pages of deliveries they queue. */
export class ReplayQueries {
  private readonly queuePageTx: Transaction<(page: ReplayPage) => boolean>;
  private readonly moveCursor: Statement<[number, number, number, string, number]>;
  private readonly insertDelivery: Statement<[string, number, string, number | null, string | null, number, number, string, number | null]>;
  private readonly insertOtherDelivery: Statement<[string, number, string, number, number, number, string]>;
  private readonly order: DeliveryOrder;
  private readonly rangeAfter: Statement<[string, number, number, number, number, number]>;

  constructor(private readonly db: Database) {
    this.rangeAfter = db
      .prepare<[string, number, number, number, number, number]>(`
        SELECT received_at, seq FROM messages INDEXED BY messages_by_source_time
        WHERE source_id = ? AND received_at >= ? AND received_at < ? AND (received_at, seq) > (?, ?)
        ORDER BY received_at, seq LIMIT ?`)
      .raw();
    this.moveCursor = db.prepare(`
      UPDATE replays SET cursor_seq = ?, queued = queued + ?, updated_at = ?
      WHERE id = ? AND cursor_seq = ? AND status = 'running'`);
    this.insertDelivery = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, retry_urls, created_at, updated_at, replay_id, after_id)
      VALUES (?, ?, 'webhooks', ?, ?, ?, ?, ?, ?, ?)`);
    this.insertOtherDelivery = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at, replay_id)
      VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)`);
    this.order = new DeliveryOrder(db);
    this.queuePageTx = db.transaction((page: ReplayPage) => {
      // `queued` counts deliveries, as `delivered` and `failed` do: one per message and destination.
      const moved = this.moveCursor.run(page.toCursor, page.messageSeqs.length * (page.destinations?.length ?? 1), page.at, page.replayId, page.fromCursor).changes > 0;
      if (!moved) return false;
      const destinations = page.destinations ?? ['webhooks'];
      for (const destination of destinations) {
        if (destination === 'webhooks') continue;
        for (const seq of page.messageSeqs) this.insertOtherDelivery.run(page.sourceId, seq, destination, page.at, page.at, page.at, page.replayId);
      }
      if (!destinations.includes('webhooks')) return true;
      const receivers = page.receivers === undefined ? null : JSON.stringify(page.receivers);
      // A transformed destination's replay waits for the transform stage,
      // linked in its key's chain as any (see docs/transformations.md).
      const status = page.transforming === true ? 'transforming' : 'pending';
      const scope = replayScope(page.replayId);
      page.messageSeqs.forEach((seq, i) => {
        const key = page.orderKeys?.[i];
        const before = key === undefined ? undefined : this.order.before(scope, key);
        const id = this.insertDelivery.run(page.sourceId, seq, status, before === undefined ? page.at : null, receivers, page.at, page.at, page.replayId, before ?? null).lastInsertRowid;
        if (key !== undefined) this.order.append(scope, key, Number(id));
      });
      return true;
    });
  }

  /**
   * Stores a running replay whose cursor is `cursor` (see
   * SqliteStore.createReplay), unless `limits` refuse it. Call it inside the
   * write lock: the count and the insert are one transaction.
   */
  create(replay: NewReplay, cursor: number, limits: ReplayLimits | undefined): ReplayRefusal | undefined {
    const list = (value: readonly string[] | undefined): string | null => (value === undefined ? null : JSON.stringify(value));
    return this.db.transaction((): ReplayRefusal | undefined => {
      if (limits !== undefined) {
        const { onSource, total } = this.db
          .prepare(`SELECT COUNT(*) AS total, COUNT(*) FILTER (WHERE source_id = ?) AS onSource FROM replays WHERE status = 'running'`)
          .get(replay.sourceId) as { onSource: number; total: number };
        if (onSource >= limits.perSource) return 'source_limit';
        if (total >= limits.total) return 'total_limit';
      }
      this.db
        .prepare(`
          INSERT INTO replays (id, source_id, from_at, to_at, receivers, types, events, status, cursor_seq, queued, created_at, updated_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, 0, ?, ?)`)
        .run(replay.id, replay.sourceId, replay.from, replay.to, list(replay.receivers), list(replay.types), list(replay.events), cursor, replay.createdAt, replay.createdAt);
      return undefined;
    }).immediate();
  }

  /**
   * One chunk of the source's messages received in `[from, to)` after the
   * index key `after` (received_at, seq), in that order, by
   * messages_by_source_time (whose entries end with the rowid, seq): at most
   * `limit` keys, so that a long range is read a chunk at a time.
   */
  rangeChunk(sourceId: string, from: number, to: number, after: readonly [number, number], limit: number): Array<[number, number]> {
    return this.rangeAfter.all(sourceId, from, to, after[0], after[1], limit) as Array<[number, number]>;
  }

  list(sourceId: string, limit: number): ReplayRecord[] {
    const rows = this.db.prepare(`${WITH_COUNTS} WHERE r.source_id = ? ORDER BY r.created_at DESC, r.id DESC LIMIT ?`).all(sourceId, limit) as ReplayRow[];
    return rows.map(toReplayRecord);
  }

  get(id: string): ReplayRecord | undefined {
    const row = this.db.prepare(`${WITH_COUNTS} WHERE r.id = ?`).get(id) as ReplayRow | undefined;
    return row === undefined ? undefined : toReplayRecord(row);
  }

  running(): ReplayRecord[] {
    return (this.db.prepare(`${WITH_COUNTS} WHERE r.status = 'running' ORDER BY r.created_at, r.id`).all() as ReplayRow[]).map(toReplayRecord);
  }

  countPending(replayId: string): number {
    const row = this.db.prepare(`SELECT COUNT(*) AS n FROM deliveries WHERE replay_id = ? AND status = 'pending'`).get(replayId) as { n: number };
    return row.n;
  }

  queuePage(page: ReplayPage): boolean {
    return this.queuePageTx.immediate(page);
  }

  end(id: string, status: 'done' | 'cancelled', at: number): ReplayRecord | undefined {
    this.db.transaction(() => {
      const changed = this.db.prepare(`UPDATE replays SET status = ?, updated_at = ? WHERE id = ? AND status = 'running'`).run(status, at, id).changes;
      if (changed > 0 && status === 'cancelled') {
        this.db
          .prepare(`DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE replay_id = ? AND status IN ('pending', 'transforming'))`)
          .run(id);
        this.db.prepare(`DELETE FROM deliveries WHERE replay_id = ? AND status IN ('pending', 'transforming')`).run(id);
      }
      // Its keys' tails: nothing is queued for it any more.
      if (changed > 0) this.db.prepare(`DELETE FROM delivery_tails WHERE scope = ?`).run(replayScope(id));
    }).immediate();
    return this.get(id);
  }
}
