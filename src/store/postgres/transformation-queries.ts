// Transformations, their versions, and the deliveries waiting for one.
import type pg from 'pg';
import type { TransformResult, TransformationRecord, TransformationVersionRecord, TransformingDelivery } from '../transformation-records.js';

interface TransformationRow {
  id: string;
  name: string;
  latest_version: number;
  created_at: number;
  updated_at: number;
}

const toRecord = (row: TransformationRow): TransformationRecord => ({ id: row.id, name: row.name, version: row.latest_version, createdAt: row.created_at, updatedAt: row.updated_at });

export async function insertTransformation(client: pg.ClientBase, id: string, name: string, code: string, at: number): Promise<TransformationVersionRecord> {
  await client.query(`INSERT INTO transformations (id, name, latest_version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)`, [id, name, at]);
  await client.query(`INSERT INTO transformation_versions (transformation_id, version, code, created_at) VALUES ($1, 1, $2, $3)`, [id, code, at]);
  return { id, name, version: 1, code, createdAt: at };
}

/** The row lock of the UPDATE orders concurrent saves: each gets its own version number. */
export async function addTransformationVersion(client: pg.ClientBase, id: string, code: string, name: string | undefined, at: number): Promise<TransformationVersionRecord | undefined> {
  const { rows } = await client.query<{ name: string; latest_version: number }>(
    `UPDATE transformations SET latest_version = latest_version + 1, name = coalesce($1, name), updated_at = $2 WHERE id = $3 RETURNING name, latest_version`,
    [name ?? null, at, id],
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  await client.query(`INSERT INTO transformation_versions (transformation_id, version, code, created_at) VALUES ($1, $2, $3, $4)`, [id, row.latest_version, code, at]);
  return { id, name: row.name, version: row.latest_version, code, createdAt: at };
}

export async function listTransformations(pool: pg.Pool): Promise<TransformationRecord[]> {
  const { rows } = await pool.query<TransformationRow>(`SELECT * FROM transformations ORDER BY created_at, id`);
  return rows.map(toRecord);
}

export async function getTransformation(pool: pg.Pool, id: string): Promise<TransformationRecord | undefined> {
  const { rows } = await pool.query<TransformationRow>(`SELECT * FROM transformations WHERE id = $1`, [id]);
  return rows[0] === undefined ? undefined : toRecord(rows[0]);
}

export async function getTransformationVersion(pool: pg.Pool, id: string, version?: number): Promise<TransformationVersionRecord | undefined> {
  const { rows } = await pool.query<{ name: string; version: number; code: string; created_at: number }>(
    `SELECT t.name, v.version, v.code, v.created_at FROM transformations t
     JOIN transformation_versions v ON v.transformation_id = t.id AND v.version = coalesce($1::integer, t.latest_version)
     WHERE t.id = $2`,
    [version ?? null, id],
  );
  const row = rows[0];
  return row === undefined ? undefined : { id, name: row.name, version: row.version, code: row.code, createdAt: row.created_at };
}

export async function listTransformationVersions(pool: pg.Pool, id: string): Promise<Array<{ version: number; createdAt: number }>> {
  const { rows } = await pool.query<{ version: number; created_at: number }>(`SELECT version, created_at FROM transformation_versions WHERE transformation_id = $1 ORDER BY version`, [id]);
  return rows.map((row) => ({ version: row.version, createdAt: row.created_at }));
}

export async function deleteTransformation(client: pg.ClientBase, id: string): Promise<boolean> {
  await client.query(`DELETE FROM transformation_versions WHERE transformation_id = $1`, [id]);
  const result = await client.query(`DELETE FROM transformations WHERE id = $1`, [id]);
  return (result.rowCount ?? 0) > 0;
}

export async function listTransformingDeliveries(pool: pg.Pool, limit: number, skipSourceIds: readonly string[]): Promise<TransformingDelivery[]> {
  const { rows } = await pool.query<{ id: number; source_id: string; message_seq: number; replay_id: string | null; message_id: string | null; body: string | null; traceparent: string | null }>(
    `SELECT d.id, d.source_id, d.message_seq, d.replay_id, m.message_id, m.body, m.traceparent FROM deliveries d LEFT JOIN messages m ON m.seq = d.message_seq
     WHERE d.status = 'transforming' AND d.source_id <> ALL($2::text[]) ORDER BY d.id LIMIT $1`,
    [limit, skipSourceIds],
  );
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

/** See `TransformationStore.finishTransforms`; each result applies only while its delivery is `transforming` (the UPDATE's row lock decides between nodes). */
export async function finishTransforms(client: pg.ClientBase, results: readonly TransformResult[]): Promise<void> {
  for (const result of results) {
    const { deliveryId, at } = result;
    let applied: boolean;
    switch (result.kind) {
      case 'output':
      case 'unchanged': {
        const first = result.kind === 'output' ? (result.bodies[0] ?? null) : null;
        const updated = await client.query(
          `UPDATE deliveries SET status = 'pending', body = $1, next_attempt_at = $2, updated_at = $2 WHERE id = $3 AND status = 'transforming'`,
          [first, at, deliveryId],
        );
        applied = (updated.rowCount ?? 0) > 0;
        // A retried message that failed in its transformation and now passes is accepted again.
        if (applied && !result.replay) await client.query(`UPDATE messages SET status = 'accepted', reason = NULL WHERE seq = $1 AND status = 'failed'`, [result.messageSeq]);
        if (applied && result.kind === 'output' && result.bodies.length > 1) {
          await client.query(
            `INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at, body)
             SELECT d.source_id, d.message_seq, d.destination, 'pending', $1, $1, $1, b.body
             FROM deliveries d, unnest($2::text[]) WITH ORDINALITY AS b(body, ord) WHERE d.id = $3 ORDER BY b.ord`,
            [at, result.bodies.slice(1), deliveryId],
          );
        }
        break;
      }
      case 'dropped': {
        const deleted = await client.query(`DELETE FROM deliveries WHERE id = $1 AND status = 'transforming'`, [deliveryId]);
        applied = (deleted.rowCount ?? 0) > 0;
        if (applied && !result.replay) await client.query(`UPDATE messages SET status = 'filtered', reason = $1 WHERE seq = $2`, [result.reason, result.messageSeq]);
        break;
      }
      case 'failed': {
        const failed = await client.query(
          `UPDATE deliveries SET status = 'failed', transform_failed = true, last_error = $1, next_attempt_at = NULL, updated_at = $2 WHERE id = $3 AND status = 'transforming'`,
          [result.reason, at, deliveryId],
        );
        applied = (failed.rowCount ?? 0) > 0;
        if (applied && !result.replay) await client.query(`UPDATE messages SET status = 'failed', reason = $1 WHERE seq = $2`, [result.reason, result.messageSeq]);
        break;
      }
    }
    if (applied && !result.replay && result.info !== undefined) await client.query(`UPDATE messages SET transform = $1 WHERE seq = $2`, [JSON.stringify(result.info), result.messageSeq]);
  }
}
