// Replays: their rows, and the pages of deliveries they queue.
import { type OrderedJob, replayScope } from '../../domain/delivery-order.js';
import { linkOrdered } from './delivery-order.js';
import type pg from 'pg';
import { type ReplayRow, toReplayRecord } from '../rows.js';
import type { NewReplay, ReplayLimits, ReplayPage, ReplayRange, ReplayRecord, ReplayRefusal } from '../store.js';

/** A replay's row with its delivered and failed counts, from its deliveries. */
const WITH_COUNTS = `
  SELECT r.*,
    (SELECT COUNT(*) FROM deliveries d WHERE d.replay_id = r.id AND d.status = 'succeeded') AS delivered,
    (SELECT COUNT(*) FROM deliveries d WHERE d.replay_id = r.id AND d.status = 'failed') AS failed
  FROM replays r`;

const list = (value: readonly string[] | undefined): string | null => (value === undefined ? null : JSON.stringify(value));

/**
 * Key of the transaction-level advisory lock that makes creating a replay
 * one node at a time, so that two nodes cannot both find room under the
 * limits and both insert (the number is arbitrary; it only has to stay fixed).
 */
const REPLAY_CREATE_LOCK = 7_230_465_013;

/**
 * Stores a running replay whose cursor is `cursor` (see
 * PostgresStore.createReplay), unless `limits` refuse it. Run it in a
 * transaction: the lock is held until its commit, and the count, a
 * statement after the lock was taken, sees every replay committed before.
 */
export async function createReplay(client: pg.ClientBase, replay: NewReplay, cursor: number, limits: ReplayLimits | undefined): Promise<ReplayRefusal | undefined> {
  if (limits !== undefined) {
    await client.query('SELECT pg_advisory_xact_lock($1)', [REPLAY_CREATE_LOCK]);
    const { rows } = await client.query<{ on_source: number; total: number }>(
      `SELECT COUNT(*)::int AS total, (COUNT(*) FILTER (WHERE source_id = $1))::int AS on_source FROM replays WHERE status = 'running'`,
      [replay.sourceId],
    );
    if (rows[0]!.on_source >= limits.perSource) return 'source_limit';
    if (rows[0]!.total >= limits.total) return 'total_limit';
  }
  await client.query(
    `INSERT INTO replays (id, source_id, from_at, to_at, receivers, types, events, status, cursor_seq, queued, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $9, 0, $8, $8)`,
    [replay.id, replay.sourceId, replay.from, replay.to, list(replay.receivers), list(replay.types), list(replay.events), replay.createdAt, cursor],
  );
  return undefined;
}

/**
 * The lowest and highest seq of the source's messages received in
 * `[from, to)`, read from messages_by_source_time alone (an index-only scan
 * of the range's entries). The subquery (OFFSET 0 keeps it one) stops the
 * planner answering min and max by walking messages_by_source in seq order
 * from either end, which reads the history before or after the range.
 */
export async function replayRangeSeqs(pool: pg.Pool, sourceId: string, from: number, to: number): Promise<ReplayRange | undefined> {
  const { rows } = await pool.query<{ first: string | null; last: string | null }>(
    `SELECT min(seq) AS first, max(seq) AS last FROM (
       SELECT seq FROM messages WHERE source_id = $1 AND received_at >= $2 AND received_at < $3 OFFSET 0) r`,
    [sourceId, from, to],
  );
  const row = rows[0];
  return row === undefined || row.first === null || row.last === null ? undefined : { first: Number(row.first), last: Number(row.last) };
}

export async function listReplays(pool: pg.Pool, sourceId: string, limit: number): Promise<ReplayRecord[]> {
  const { rows } = await pool.query<ReplayRow>(`${WITH_COUNTS} WHERE r.source_id = $1 ORDER BY r.created_at DESC, r.id DESC LIMIT $2`, [sourceId, limit]);
  return rows.map(toReplayRecord);
}

export async function getReplay(client: pg.Pool | pg.ClientBase, id: string): Promise<ReplayRecord | undefined> {
  const { rows } = await client.query<ReplayRow>(`${WITH_COUNTS} WHERE r.id = $1`, [id]);
  return rows[0] === undefined ? undefined : toReplayRecord(rows[0]);
}

export async function listRunningReplays(pool: pg.Pool): Promise<ReplayRecord[]> {
  const { rows } = await pool.query<ReplayRow>(`${WITH_COUNTS} WHERE r.status = 'running' ORDER BY r.created_at, r.id`);
  return rows.map(toReplayRecord);
}

export async function countPendingReplayDeliveries(pool: pg.Pool, replayId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`SELECT COUNT(*) AS n FROM deliveries WHERE replay_id = $1 AND status = 'pending'`, [replayId]);
  return rows[0]!.n;
}

/**
 * The cursor moves first, conditionally: of two nodes queueing the same page,
 * the second waits on the first's row lock, then finds the cursor moved and
 * queues nothing.
 */
export async function queueReplayPage(client: pg.ClientBase, page: ReplayPage): Promise<boolean> {
  const moved = await client.query(
    `UPDATE replays SET cursor_seq = $1, queued = queued + $2, updated_at = $3
     WHERE id = $4 AND cursor_seq = $5 AND status = 'running'`,
    // `queued` counts deliveries, as `delivered` and `failed` do: one per message and destination.
    [page.toCursor, page.messageSeqs.length * (page.destinations?.length ?? 1), page.at, page.replayId, page.fromCursor],
  );
  if (moved.rowCount === 0) return false;
  if (page.messageSeqs.length === 0) return true;
  const destinations = page.destinations ?? ['webhooks'];
  const others = destinations.filter((d) => d !== 'webhooks');
  if (others.length > 0) {
    await client.query(
      `INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at, replay_id)
       SELECT $1, q.seq, t.destination, 'pending', $2, $2, $2, $3
       FROM unnest($4::bigint[]) WITH ORDINALITY AS q(seq, ord) CROSS JOIN unnest($5::text[]) AS t(destination) ORDER BY q.ord`,
      [page.sourceId, page.at, page.replayId, page.messageSeqs, others],
    );
  }
  if (!destinations.includes('webhooks')) return true;
  // Keyed ones start with no due time; linkOrdered chains them per key. A
  // transformed destination's replay waits for the transform stage, linked
  // as any (the stage decides when each falls due).
  const keyOf = (i: number): string | undefined => page.orderKeys?.[i];
  const ordered = page.messageSeqs.map((_, i) => keyOf(i) !== undefined);
  const queued = await client.query<{ id: string; ordered: boolean }>(
    `INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, retry_urls, created_at, updated_at, replay_id)
     SELECT $1, q.seq, 'webhooks', $7, CASE WHEN q.ordered THEN NULL ELSE $2::bigint END, $3, $2, $2, $4
     FROM unnest($5::bigint[], $6::boolean[]) WITH ORDINALITY AS q(seq, ordered, ord) ORDER BY q.ord
     RETURNING id, next_attempt_at IS NULL AS ordered`,
    [page.sourceId, page.at, list(page.receivers), page.replayId, page.messageSeqs, ordered, page.transforming === true ? 'transforming' : 'pending'],
  );
  const ids = queued.rows.filter((row) => row.ordered).map((row) => Number(row.id)).sort((a, b) => a - b);
  const scope = replayScope(page.replayId);
  const jobs: OrderedJob[] = [];
  page.messageSeqs.forEach((_, i) => {
    const key = keyOf(i);
    if (key !== undefined) jobs.push({ id: ids[jobs.length]!, scope, key, at: page.at });
  });
  await linkOrdered(client, jobs);
  return true;
}

export async function endReplay(client: pg.ClientBase, id: string, status: 'done' | 'cancelled', at: number): Promise<ReplayRecord | undefined> {
  const changed = await client.query(`UPDATE replays SET status = $1, updated_at = $2 WHERE id = $3 AND status = 'running'`, [status, at, id]);
  if ((changed.rowCount ?? 0) > 0 && status === 'cancelled') {
    await client.query(`DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE replay_id = $1 AND status IN ('pending', 'transforming'))`, [id]);
    await client.query(`DELETE FROM deliveries WHERE replay_id = $1 AND status IN ('pending', 'transforming')`, [id]);
  }
  // Its keys' tails: nothing is queued for it any more.
  if ((changed.rowCount ?? 0) > 0) await client.query(`DELETE FROM delivery_tails WHERE scope = $1`, [replayScope(id)]);
  return getReplay(client, id);
}
