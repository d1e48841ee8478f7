import type { Database, Statement, Transaction } from 'better-sqlite3';
import type { OrderPlace } from '../../domain/delivery-order.js';
import type { StatusChange } from '../../domain/traffic.js';
import { DeliveryOrder } from './delivery-order.js';
import type { TrafficQueries } from './traffic-queries.js';
import type { TransformResult, TransformationRecord, TransformationVersionRecord, TransformingDelivery } from '../transformation-records.js';

interface TransformationRow {
  id: string;
  name: string;
  latest_version: number;
  created_at: number;
  updated_at: number;
}

interface WaitingRow {
  id: number;
  source_id: string;
  message_seq: number;
  replay_id: string | null;
  message_id: string | null;
  body: string | null;
  traceparent: string | null;
}

const toRecord = (row: TransformationRow): TransformationRecord => ({ id: row.id, name: row.name, version: row.latest_version, createdAt: row.created_at, updatedAt: row.updated_at });

/** Transformations, their versions, and the deliveries waiting for one. */
export class TransformationQueries {
  private readonly finishTx: Transaction<(results: readonly TransformResult[]) => void>;
  private readonly waiting: Statement<[string, number], WaitingRow>;

  constructor(
    private readonly db: Database,
    traffic: TrafficQueries,
  ) {
    this.waiting = db.prepare(`
      SELECT d.id, d.source_id, d.message_seq, d.replay_id, m.message_id, m.body, m.traceparent FROM deliveries d LEFT JOIN messages m ON m.seq = d.message_seq
      WHERE d.status = 'transforming' AND d.source_id NOT IN (SELECT value FROM json_each(?)) ORDER BY d.id LIMIT ?`);
    const order = new DeliveryOrder(db);
    // Pending, and waiting until the body and due time are decided (below, in the same transaction).
    const toPending = db.prepare(`UPDATE deliveries SET status = 'pending', next_attempt_at = NULL, updated_at = ? WHERE id = ? AND status = 'transforming' RETURNING after_id`);
    const settle = db.prepare(`UPDATE deliveries SET body = ?, after_id = ?, next_attempt_at = ? WHERE id = ?`);
    const toFailed = db.prepare(
      `UPDATE deliveries SET status = 'failed', transform_failed = 1, last_error = ?, next_attempt_at = NULL, updated_at = ? WHERE id = ? AND status = 'transforming' RETURNING after_id`,
    );
    const remove = db.prepare(`DELETE FROM deliveries WHERE id = ? AND status = 'transforming' RETURNING after_id`);
    // A split's part: a delivery of the same message, destination, replay and receivers.
    const split = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, after_id, retry_urls, replay_id, created_at, updated_at, body)
      SELECT source_id, message_seq, destination, 'pending', ?, ?, retry_urls, replay_id, ?, ?, ? FROM deliveries WHERE id = ?`);
    const messageBefore = db.prepare(`SELECT status, received_at FROM messages WHERE seq = ?`);
    const messageStatus = db.prepare(`UPDATE messages SET status = ?, reason = ? WHERE seq = ?`);
    const messageInfo = db.prepare(`UPDATE messages SET transform = ? WHERE seq = ?`);
    // A retried message that failed in its transformation and now passes is accepted again.
    const reaccept = db.prepare(`UPDATE messages SET status = 'accepted', reason = NULL WHERE seq = ? AND status = 'failed' RETURNING received_at`);
    /**
     * The delivery `id` (now pending, waiting) with `bodies`: due at `at`
     * unless its predecessor is still open (see TransformationStore.finishTransforms).
     */
    const deliver = (id: number, afterId: number | null, bodies: ReadonlyArray<string | null>, place: OrderPlace | undefined, at: number): void => {
      const due = afterId === null || !order.isOpen(afterId) ? at : null;
      if (bodies.length === 1) {
        settle.run(bodies[0]!, afterId, due, id);
      } else if (!order.isChained(id, afterId, place)) {
        settle.run(bodies[0]!, afterId, at, id);
        for (const body of bodies.slice(1)) split.run(at, null, at, at, body, id);
      } else {
        // The parts in turn from the predecessor; this delivery, which its
        // successor and the key's tail name, carries the last one.
        let previous = afterId;
        let next = due;
        for (const body of bodies.slice(0, -1)) {
          previous = Number(split.run(next, previous, at, at, body, id).lastInsertRowid);
          next = null;
        }
        settle.run(bodies.at(-1)!, previous, null, id);
      }
    };
    this.finishTx = db.transaction((results: readonly TransformResult[]) => {
      // Processing counted each message in the overview as it stored it
      // (`accepted`); what the transformation made of it moves that count,
      // in this commit (see `recount`).
      const changes: StatusChange[] = [];
      /** The message `filtered` or `failed` with `reason`, noting the change of its status. */
      const setMessageStatus = (seq: number, status: 'filtered' | 'failed', reason: string): void => {
        const before = messageBefore.get(seq) as { status: string; received_at: number } | undefined;
        if (before === undefined) return;
        messageStatus.run(status, reason, seq);
        changes.push({ receivedAt: before.received_at, from: before.status, to: status });
      };
      for (const result of results) {
        const { deliveryId, at } = result;
        let applied: boolean;
        switch (result.kind) {
          case 'output':
          case 'unchanged': {
            const row = toPending.get(at, deliveryId) as { after_id: number | null } | undefined;
            applied = row !== undefined;
            if (row !== undefined) deliver(deliveryId, row.after_id, result.kind === 'output' ? result.bodies : [null], result.order, at);
            break;
          }
          case 'dropped': {
            const row = remove.get(deliveryId) as { after_id: number | null } | undefined;
            applied = row !== undefined;
            if (row !== undefined) order.passOn(deliveryId, row.after_id, result.order, at);
            if (applied && !result.replay) setMessageStatus(result.messageSeq, 'filtered', result.reason);
            break;
          }
          case 'failed': {
            const row = toFailed.get(result.reason, at, deliveryId) as { after_id: number | null } | undefined;
            applied = row !== undefined;
            // Never sent, and possibly before its predecessor ended: it leaves the key's order as a drop does.
            if (row !== undefined) order.passOn(deliveryId, row.after_id, result.order, at);
            if (applied && !result.replay) setMessageStatus(result.messageSeq, 'failed', result.reason);
            break;
          }
        }
        if (applied && !result.replay && (result.kind === 'output' || result.kind === 'unchanged')) {
          const row = reaccept.get(result.messageSeq) as { received_at: number } | undefined;
          if (row !== undefined) changes.push({ receivedAt: row.received_at, from: 'failed', to: 'accepted' });
        }
        if (applied && !result.replay && result.info !== undefined) messageInfo.run(JSON.stringify(result.info), result.messageSeq);
      }
      traffic.move(changes);
    });
  }

  insert(id: string, name: string, code: string, at: number): TransformationVersionRecord {
    this.db.transaction(() => {
      this.db.prepare(`INSERT INTO transformations (id, name, latest_version, created_at, updated_at) VALUES (?, ?, 1, ?, ?)`).run(id, name, at, at);
      this.db.prepare(`INSERT INTO transformation_versions (transformation_id, version, code, created_at) VALUES (?, 1, ?, ?)`).run(id, code, at);
    })();
    return { id, name, version: 1, code, createdAt: at };
  }

  addVersion(id: string, code: string, name: string | undefined, at: number): TransformationVersionRecord | undefined {
    return this.db.transaction(() => {
      const row = this.db
        .prepare(`UPDATE transformations SET latest_version = latest_version + 1, name = coalesce(?, name), updated_at = ? WHERE id = ? RETURNING name, latest_version`)
        .get(name ?? null, at, id) as { name: string; latest_version: number } | undefined;
      if (row === undefined) return undefined;
      this.db.prepare(`INSERT INTO transformation_versions (transformation_id, version, code, created_at) VALUES (?, ?, ?, ?)`).run(id, row.latest_version, code, at);
      return { id, name: row.name, version: row.latest_version, code, createdAt: at };
    })();
  }

  list(): TransformationRecord[] {
    return (this.db.prepare(`SELECT * FROM transformations ORDER BY created_at, id`).all() as TransformationRow[]).map(toRecord);
  }

  get(id: string): TransformationRecord | undefined {
    const row = this.db.prepare(`SELECT * FROM transformations WHERE id = ?`).get(id) as TransformationRow | undefined;
    return row === undefined ? undefined : toRecord(row);
  }

  getVersion(id: string, version?: number): TransformationVersionRecord | undefined {
    const row = this.db
      .prepare(`
        SELECT t.name, v.version, v.code, v.created_at FROM transformations t
        JOIN transformation_versions v ON v.transformation_id = t.id AND v.version = coalesce(?, t.latest_version)
        WHERE t.id = ?`)
      .get(version ?? null, id) as { name: string; version: number; code: string; created_at: number } | undefined;
    return row === undefined ? undefined : { id, name: row.name, version: row.version, code: row.code, createdAt: row.created_at };
  }

  versions(id: string): Array<{ version: number; createdAt: number }> {
    return (this.db.prepare(`SELECT version, created_at FROM transformation_versions WHERE transformation_id = ? ORDER BY version`).all(id) as Array<{ version: number; created_at: number }>).map(
      (row) => ({ version: row.version, createdAt: row.created_at }),
    );
  }

  delete(id: string): boolean {
    return this.db.transaction(() => {
      this.db.prepare(`DELETE FROM transformation_versions WHERE transformation_id = ?`).run(id);
      return this.db.prepare(`DELETE FROM transformations WHERE id = ?`).run(id).changes > 0;
    })();
  }

  transforming(limit: number, skipSourceIds: readonly string[]): TransformingDelivery[] {
    const rows = this.waiting.all(JSON.stringify(skipSourceIds), limit);
    return rows.map((row) => ({
      id: row.id,
      sourceId: row.source_id,
      messageSeq: row.message_seq,
      messageId: row.message_id ?? undefined,
      body: row.body,
      replay: row.replay_id !== null,
      ...(row.replay_id !== null && { replayId: row.replay_id }),
      ...(row.traceparent !== null && { traceparent: row.traceparent }),
    }));
  }

  finish(results: readonly TransformResult[]): void {
    this.finishTx.immediate(results);
  }
}
