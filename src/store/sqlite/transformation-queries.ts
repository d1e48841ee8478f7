import type { Database, Transaction } from 'better-sqlite3';
import type { TransformResult, TransformationRecord, TransformationVersionRecord, TransformingDelivery } from '../transformation-records.js';

interface TransformationRow {
  id: string;
  name: string;
  latest_version: number;
  created_at: number;
  updated_at: number;
}

const toRecord = (row: TransformationRow): TransformationRecord => ({ id: row.id, name: row.name, version: row.latest_version, createdAt: row.created_at, updatedAt: row.updated_at });

/** Transformations, their versions, and the deliveries waiting for one. */
export class TransformationQueries {
  private readonly finishTx: Transaction<(results: readonly TransformResult[]) => void>;

  constructor(private readonly db: Database) {
    const toPending = db.prepare(`UPDATE deliveries SET status = 'pending', body = ?, next_attempt_at = ?, updated_at = ? WHERE id = ? AND status = 'transforming'`);
    const toFailed = db.prepare(`UPDATE deliveries SET status = 'failed', transform_failed = 1, last_error = ?, next_attempt_at = NULL, updated_at = ? WHERE id = ? AND status = 'transforming'`);
    const remove = db.prepare(`DELETE FROM deliveries WHERE id = ? AND status = 'transforming'`);
    const split = db.prepare(`
      INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at, body)
      SELECT source_id, message_seq, destination, 'pending', ?, ?, ?, ? FROM deliveries WHERE id = ?`);
    const messageStatus = db.prepare(`UPDATE messages SET status = ?, reason = ? WHERE seq = ?`);
    const messageInfo = db.prepare(`UPDATE messages SET transform = ? WHERE seq = ?`);
    // A retried message that failed in its transformation and now passes is accepted again.
    const reaccept = db.prepare(`UPDATE messages SET status = 'accepted', reason = NULL WHERE seq = ? AND status = 'failed'`);
    this.finishTx = db.transaction((results: readonly TransformResult[]) => {
      for (const result of results) {
        const { deliveryId, at } = result;
        let applied: boolean;
        switch (result.kind) {
          case 'output':
            applied = toPending.run(result.bodies[0] ?? null, at, at, deliveryId).changes > 0;
            // A split's further messages: new deliveries after the first, in order.
            if (applied) for (const body of result.bodies.slice(1)) split.run(at, at, at, body, deliveryId);
            break;
          case 'unchanged':
            applied = toPending.run(null, at, at, deliveryId).changes > 0;
            break;
          case 'dropped':
            applied = remove.run(deliveryId).changes > 0;
            if (applied && !result.replay) messageStatus.run('filtered', result.reason, result.messageSeq);
            break;
          case 'failed':
            applied = toFailed.run(result.reason, at, deliveryId).changes > 0;
            if (applied && !result.replay) messageStatus.run('failed', result.reason, result.messageSeq);
            break;
        }
        if (applied && !result.replay && (result.kind === 'output' || result.kind === 'unchanged')) reaccept.run(result.messageSeq);
        if (applied && !result.replay && result.info !== undefined) messageInfo.run(JSON.stringify(result.info), result.messageSeq);
      }
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
    const rows = this.db
      .prepare(`
        SELECT d.id, d.source_id, d.message_seq, d.replay_id, m.message_id, m.body, m.traceparent FROM deliveries d LEFT JOIN messages m ON m.seq = d.message_seq
        WHERE d.status = 'transforming' AND d.source_id NOT IN (SELECT value FROM json_each(?)) ORDER BY d.id LIMIT ?`)
      .all(JSON.stringify(skipSourceIds), limit) as Array<{ id: number; source_id: string; message_seq: number; replay_id: string | null; message_id: string | null; body: string | null; traceparent: string | null }>;
    return rows.map((row) => ({
      id: row.id,
      sourceId: row.source_id,
      messageSeq: row.message_seq,
      messageId: row.message_id ?? undefined,
      body: row.body,
      replay: row.replay_id !== null,
      ...(row.traceparent !== null && { traceparent: row.traceparent }),
    }));
  }

  finish(results: readonly TransformResult[]): void {
    this.finishTx.immediate(results);
  }
}
