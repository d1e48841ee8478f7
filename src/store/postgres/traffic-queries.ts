// The `traffic_minutes` counters (see src/domain/traffic.ts).
import type pg from 'pg';
import { type StatusChange, type TrafficCount, type TrafficMetric, recount, tally } from '../../domain/traffic.js';

/**
 * Every node adds to the counters of the current minute. One row per
 * (minute, metric, status) would make their commits wait for each other on
 * that row's lock, so each connection writes its own shard (its backend pid
 * modulo this) and readers add the shards up.
 */
export const TRAFFIC_SHARDS = 16;

/** Counts `events` in the transaction `client` has open, one statement. */
export async function addTraffic(
  client: pg.ClientBase,
  metric: TrafficMetric,
  events: Iterable<{ readonly at: number; readonly status: string }>,
): Promise<void> {
  const counts = tally(events);
  if (counts.length === 0) return;
  await client.query(
    `INSERT INTO traffic_minutes (minute, metric, status, shard, count)
     SELECT minute, $1, status, pg_backend_pid() % ${TRAFFIC_SHARDS}, count
     FROM unnest($2::bigint[], $3::text[], $4::bigint[]) WITH ORDINALITY AS c(minute, status, count, ord)
     ORDER BY c.ord
     ON CONFLICT (minute, metric, status, shard) DO UPDATE SET count = traffic_minutes.count + excluded.count`,
    [metric, counts.map((c) => c.minute), counts.map((c) => c.status), counts.map((c) => c.count)],
  );
}

/**
 * Moves messages between statuses' message counts (see `recount`) in the
 * transaction `client` has open, one statement. A count is taken only from
 * a counter that is there: a message received in a minute already pruned,
 * or before the counters existed, was not counted in it. A shard's row may
 * go below zero; the shards' sum is what is read.
 *
 * The moves go to shards of their own (TRAFFIC_SHARDS and up), which
 * processing never writes: the transform stage moves counts at the end of a
 * commit that has locked key tails and deliveries, while processing counts
 * in the statement that stores messages, before linkOrdered locks key tails
 * and predecessors; on a shared row the two could each wait for the other. Among moves, the rows are locked in
 * `recount`'s order (minute, status).
 */
export async function moveTraffic(client: pg.ClientBase, changes: Iterable<StatusChange>): Promise<void> {
  const counts = recount(changes);
  if (counts.length === 0) return;
  await client.query(
    `INSERT INTO traffic_minutes (minute, metric, status, shard, count)
     SELECT c.minute, 'messages', c.status, ${TRAFFIC_SHARDS} + pg_backend_pid() % ${TRAFFIC_SHARDS}, c.count
     FROM unnest($1::bigint[], $2::text[], $3::bigint[]) WITH ORDINALITY AS c(minute, status, count, ord)
     WHERE c.count > 0 OR EXISTS (SELECT 1 FROM traffic_minutes t WHERE t.minute = c.minute AND t.metric = 'messages' AND t.status = c.status)
     ORDER BY c.ord
     ON CONFLICT (minute, metric, status, shard) DO UPDATE SET count = traffic_minutes.count + excluded.count`,
    [counts.map((c) => c.minute), counts.map((c) => c.status), counts.map((c) => c.count)],
  );
}

export async function trafficSince(pool: pg.Pool, since: number): Promise<TrafficCount[]> {
  const { rows } = await pool.query<TrafficCount>(
    `SELECT minute, metric, status, sum(count)::bigint AS count FROM traffic_minutes
     WHERE minute >= $1 GROUP BY minute, metric, status ORDER BY minute, metric, status`,
    [since],
  );
  return rows;
}

export async function pruneTraffic(pool: pg.Pool, before: number): Promise<number> {
  return (await pool.query(`DELETE FROM traffic_minutes WHERE minute < $1`, [before])).rowCount ?? 0;
}
