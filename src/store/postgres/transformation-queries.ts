// Transformations, their versions, and the deliveries waiting for one.
import type pg from 'pg';
import type { OrderPlace } from '../../domain/delivery-order.js';
import type { TransformResult, TransformationRecord, TransformationVersionRecord, TransformingDelivery } from '../transformation-records.js';
import type { StatusChange } from '../../domain/traffic.js';
import { isChainHead, lockIfOpen, lockTailsNaming, passOn } from './delivery-order.js';
import { moveTraffic } from './traffic-queries.js';

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
    ...(row.replay_id !== null && { replayId: row.replay_id }),
    ...(row.traceparent !== null && { traceparent: row.traceparent }),
  }));
}

/**
 * See `TransformationStore.finishTransforms`; each result applies only while
 * its delivery is `transforming` (the UPDATE's row lock decides between
 * nodes). Ordered deliveries follow processing's locking (see
 * docs/architecture.md, "Ordered delivery"): tails first, then deliveries;
 * an open predecessor is locked FOR SHARE before a delivery is left waiting
 * for it, and a release is a statement after the update that ended a
 * delivery.
 */
export async function finishTransforms(client: pg.ClientBase, results: readonly TransformResult[]): Promise<void> {
  await lockTailsNaming(
    client,
    results.flatMap((result) => ((result.kind === 'dropped' || result.kind === 'failed') && result.order !== undefined ? [{ id: result.deliveryId, place: result.order }] : [])),
  );
  // Processing counted each message in the overview as it stored it
  // (`accepted`); what the transformation made of it moves that count, in
  // this commit (see `recount`).
  const changes: StatusChange[] = [];
  for (const result of results) {
    const { deliveryId, at } = result;
    let applied: boolean;
    switch (result.kind) {
      case 'output':
      case 'unchanged': {
        const bodies = result.kind === 'output' ? result.bodies : [null];
        applied = await deliver(client, deliveryId, bodies, result.order, at);
        // A retried message that failed in its transformation and now passes is accepted again.
        if (applied && !result.replay) {
          const reaccepted = await client.query<{ received_at: number }>(`UPDATE messages SET status = 'accepted', reason = NULL WHERE seq = $1 AND status = 'failed' RETURNING received_at`, [
            result.messageSeq,
          ]);
          for (const row of reaccepted.rows) changes.push({ receivedAt: row.received_at, from: 'failed', to: 'accepted' });
        }
        break;
      }
      case 'dropped': {
        const deleted = await client.query<{ after_id: string | null }>(`DELETE FROM deliveries WHERE id = $1 AND status = 'transforming' RETURNING after_id`, [deliveryId]);
        const row = deleted.rows[0];
        applied = row !== undefined;
        if (row !== undefined) await passOn(client, deliveryId, row.after_id === null ? null : Number(row.after_id), result.order, at);
        if (applied && !result.replay) changes.push(...(await setMessageStatus(client, result.messageSeq, 'filtered', result.reason)));
        break;
      }
      case 'failed': {
        const failed = await client.query<{ after_id: string | null }>(
          `UPDATE deliveries SET status = 'failed', transform_failed = true, last_error = $1, next_attempt_at = NULL, updated_at = $2 WHERE id = $3 AND status = 'transforming' RETURNING after_id`,
          [result.reason, at, deliveryId],
        );
        const row = failed.rows[0];
        applied = row !== undefined;
        // Never sent, and possibly before its predecessor ended: it leaves the key's order as a drop does.
        if (row !== undefined) await passOn(client, deliveryId, row.after_id === null ? null : Number(row.after_id), result.order, at);
        if (applied && !result.replay) changes.push(...(await setMessageStatus(client, result.messageSeq, 'failed', result.reason)));
        break;
      }
    }
    if (applied && !result.replay && result.info !== undefined) await client.query(`UPDATE messages SET transform = $1 WHERE seq = $2`, [JSON.stringify(result.info), result.messageSeq]);
  }
  await moveTraffic(client, changes);
}

/** The message `status` with `reason`; the change of its status (none when the message is gone). */
async function setMessageStatus(client: pg.ClientBase, seq: number, status: 'filtered' | 'failed', reason: string): Promise<StatusChange[]> {
  // The status it had, read under the row lock the update takes.
  const { rows } = await client.query<{ previous: string; received_at: number }>(
    `UPDATE messages m SET status = $1, reason = $2 FROM (SELECT seq, status FROM messages WHERE seq = $3 FOR UPDATE) old
     WHERE m.seq = old.seq RETURNING old.status AS previous, m.received_at`,
    [status, reason, seq],
  );
  return rows.map((row) => ({ receivedAt: row.received_at, from: row.previous, to: status }));
}

/**
 * Makes the delivery `pending` with `bodies` (see the SQLite twin): due at
 * `at` unless it waits for a predecessor still open, which is then locked
 * FOR SHARE (its outcome's release, which waits for this commit, then sees
 * this delivery waiting). Resolves false when it was not `transforming`.
 */
async function deliver(client: pg.ClientBase, id: number, bodies: ReadonlyArray<string | null>, place: OrderPlace | undefined, at: number): Promise<boolean> {
  // One body and no predecessor (every unordered delivery): one statement.
  const updated = await client.query<{ after_id: string | null }>(
    `UPDATE deliveries SET status = 'pending', body = $1, next_attempt_at = CASE WHEN after_id IS NULL AND $4 THEN $2::bigint END, updated_at = $2
     WHERE id = $3 AND status = 'transforming' RETURNING after_id`,
    [bodies.length === 1 ? bodies[0] : null, at, id, bodies.length === 1],
  );
  const row = updated.rows[0];
  if (row === undefined) return false;
  const afterId = row.after_id === null ? null : Number(row.after_id);
  if (bodies.length === 1) {
    if (afterId !== null && !(await lockIfOpen(client, afterId))) await client.query(`UPDATE deliveries SET next_attempt_at = $1 WHERE id = $2`, [at, id]);
    return true;
  }
  if (afterId === null && !(await isChainHead(client, id, place))) {
    await client.query(`UPDATE deliveries SET body = $1, next_attempt_at = $2 WHERE id = $3`, [bodies[0], at, id]);
    await insertParts(client, id, bodies.slice(1), at, at);
    return true;
  }
  // The parts in turn from the predecessor; this delivery, which its
  // successor and the key's tail name, carries the last one behind them.
  const firstDue = afterId === null || !(await lockIfOpen(client, afterId));
  const parts = await insertParts(client, id, bodies.slice(0, -1), null, at);
  const chain = [...parts, id];
  await client.query(
    `UPDATE deliveries d SET after_id = u.after_id, next_attempt_at = u.due, body = coalesce(u.body, d.body)
     FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[]) AS u(id, after_id, due, body) WHERE d.id = u.id`,
    [chain, chain.map((_, i) => (i === 0 ? afterId : chain[i - 1]!)), chain.map((_, i) => (i === 0 && firstDue ? at : null)), chain.map((_, i) => (i === chain.length - 1 ? bodies.at(-1)! : null))],
  );
  return true;
}

/** New pending deliveries of the delivery's message, destination, replay and receivers, one per body, ids in body order; due at `due` (null: waiting). */
async function insertParts(client: pg.ClientBase, id: number, bodies: ReadonlyArray<string | null>, due: number | null, at: number): Promise<number[]> {
  const inserted = await client.query<{ id: string }>(
    // ORDER BY ord: the identity hands out ids in body order.
    `INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, retry_urls, replay_id, created_at, updated_at, body)
     SELECT d.source_id, d.message_seq, d.destination, 'pending', $1::bigint, d.retry_urls, d.replay_id, $4, $4, b.body
     FROM deliveries d, unnest($2::text[]) WITH ORDINALITY AS b(body, ord) WHERE d.id = $3 ORDER BY b.ord
     RETURNING id`,
    [due, bodies, id, at],
  );
  return inserted.rows.map((r) => Number(r.id)).sort((a, b) => a - b);
}
