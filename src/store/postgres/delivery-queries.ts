// The delivery queue: claims with leases, outcomes, and the admin views of it.
import type pg from 'pg';
import { MINUTE_MS } from '../../domain/traffic.js';
import { TRAFFIC_SHARDS } from './traffic-queries.js';
import type {
  ClaimRequest,
  ClaimedDelivery,
  DeliveryDetail,
  DeliveryFilter,
  DeliveryOutcome,
  DeliveryRecord,
  RequeueFilter,
} from '../store.js';
import { inTransaction, textColumn } from './connection.js';
import { releaseSuccessors } from './delivery-order.js';
import { type AttemptRow, type ClaimedRow, type DeliveryRow, toAttemptRecord, toClaimedDelivery, toDeliveryRecord } from '../rows.js';

/**
 * SKIP LOCKED passes over rows another node is leasing right now instead of
 * queueing behind it; a row leased and committed since this statement's
 * snapshot is re-checked by PostgreSQL against `next_attempt_at <= now`,
 * which its new lease fails, so two nodes never lease one delivery at once.
 * Leasing moves next_attempt_at to the lease's end: see the schema.
 *
 * The plan must walk deliveries_due in order and stop after `limit` rows,
 * whatever the statistics say. They are stale on a queue table as a rule (a
 * backlog builds up faster than autovacuum analyzes it, and without
 * autovacuum they are never there): estimating a handful of due rows, the
 * planner took a bitmap scan of every pending row and sorted them all to
 * keep 128, 7-11 ms per claim on a backlog of 60,000 (measured), O(backlog)
 * per claim. Bitmap and sequential scans are turned off for this statement
 * alone (SET LOCAL, so the transaction), which leaves the ordered index scan.
 * The statement is named: prepared once per connection, planned under those
 * settings (SET LOCAL is in force whenever it runs), and listing its columns.
 */
export async function claimDeliveries(pool: pg.Pool, request: ClaimRequest): Promise<ClaimedDelivery[]> {
  return inTransaction(
    pool,
    async (client) => {
      const { rows } = await client.query<ClaimedRow>({
        name: 'switchyard_claim_deliveries',
        text: `WITH due AS (
           SELECT id FROM deliveries
           WHERE status = 'pending' AND next_attempt_at <= $1
           ORDER BY next_attempt_at
           LIMIT $2
           FOR UPDATE SKIP LOCKED),
         leased AS (
           UPDATE deliveries d SET lease_owner = $3, next_attempt_at = $4, updated_at = $1
           FROM due WHERE d.id = due.id
           RETURNING ${CLAIMED_COLUMNS}, d.body AS own_body)
         SELECT leased.*, coalesce(leased.own_body, m.body) AS body, leased.own_body IS NOT NULL AS transformed, m.traceparent FROM leased LEFT JOIN messages m ON m.seq = leased.message_seq
         ORDER BY leased.id`,
        values: [request.now, request.limit, request.owner, request.now + request.leaseMs],
      });
      return rows.map(toClaimedDelivery);
    },
    'BEGIN; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off',
  );
}

const CLAIMED_COLUMNS = 'd.id, d.source_id, d.destination, d.message_seq, d.attempt_count, d.first_attempt_at, d.retry_urls, d.created_at, d.replay_id, d.cancelled';

/**
 * Every outcome and attempt in one statement (so one commit, one round trip):
 * arrays of outcomes and attempts go in as parameters. An outcome whose owner
 * no longer holds the lease changes nothing, and its attempts are dropped.
 *
 * The outcomes reach their deliveries by primary key, one probe each. The
 * updates match on the lease alone and say nothing of `status`: a lease is
 * only ever taken on a pending delivery (the claim) and only an outcome takes
 * a delivery out of pending, clearing the lease as it does, so
 * `lease_owner = owner` implies pending. Naming `status = 'pending'` here let
 * the planner read the deliveries through deliveries_due, whose predicate it
 * matches: with statistics that think few deliveries are pending (a backlog
 * built since the last analyze, or a fresh table), it walked every pending
 * delivery and compared each with every outcome, 1-1.4 s per batch of 256
 * on a backlog of ~6,000 (measured with auto_explain), O(backlog x batch).
 * Sequential scans are turned off for the transaction, as for claims, so that
 * a plan cached while the table was small does not read all of it.
 */
export async function finishDeliveries(pool: pg.Pool, outcomes: readonly DeliveryOutcome[]): Promise<number> {
  if (outcomes.length === 0) return 0;
  const o = {
    id: [] as number[],
    owner: [] as string[],
    kind: [] as string[],
    at: [] as number[],
    firstAttemptAt: [] as Array<number | null>,
    nextAttemptAt: [] as Array<number | null>,
    retryUrls: [] as Array<string | null>,
    lastError: [] as Array<string | null>,
  };
  const a = {
    deliveryId: [] as number[],
    at: [] as number[],
    url: [] as string[],
    statusCode: [] as Array<number | null>,
    error: [] as Array<string | null>,
    durationMs: [] as number[],
    response: [] as Array<string | null>,
    functionRun: [] as Array<string | null>,
  };
  // In id order, so that two statements touching the same rows (a worker
  // whose lease ran out, and its successor) lock them in the same order.
  for (const outcome of [...outcomes].sort((x, y) => x.id - y.id)) {
    o.id.push(outcome.id);
    o.owner.push(outcome.owner);
    o.kind.push(outcome.kind);
    o.at.push(outcome.at);
    o.nextAttemptAt.push(outcome.kind === 'retry' || outcome.kind === 'deferred' ? outcome.nextAttemptAt : null);
    if (outcome.kind === 'deferred') {
      o.firstAttemptAt.push(null);
      o.retryUrls.push(null);
      o.lastError.push(null);
      continue;
    }
    o.firstAttemptAt.push(outcome.firstAttemptAt);
    o.retryUrls.push(outcome.kind === 'retry' ? JSON.stringify(outcome.retryUrls) : null);
    o.lastError.push(textColumn(outcome.lastError));
    for (const attempt of outcome.attempts) {
      a.deliveryId.push(outcome.id);
      a.at.push(attempt.at);
      a.url.push(textColumn(attempt.url)!);
      a.statusCode.push(attempt.statusCode ?? null);
      a.error.push(textColumn(attempt.error));
      a.durationMs.push(Math.round(attempt.durationMs));
      a.response.push(attempt.response === undefined ? null : textColumn(JSON.stringify(attempt.response))!);
      a.functionRun.push(attempt.functionRun === undefined ? null : textColumn(JSON.stringify(attempt.functionRun))!);
    }
  }
  // A transaction: the successors of deliveries that ended are released by a
  // statement of its own after the outcomes (see delivery-order.ts), in the
  // same commit, so an outcome is never recorded without its release.
  return inTransaction(pool, async (client) => {
    const ended = await client.query<{ id: string }>({
      // Named: prepared once per connection (see raw-queries.ts); it returns the deliveries that ended.
      name: 'switchyard_finish_deliveries_ended',
      text: `WITH o AS (
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::text[])
           AS o(id, owner, kind, at, first_attempt_at, next_attempt_at, retry_urls, last_error)),
       finished AS (
         UPDATE deliveries d SET
           status = CASE o.kind WHEN 'retry' THEN 'pending' ELSE o.kind END,
           attempt_count = d.attempt_count + 1, first_attempt_at = o.first_attempt_at,
           next_attempt_at = o.next_attempt_at, retry_urls = o.retry_urls, last_error = o.last_error,
           lease_owner = NULL, updated_at = o.at
         FROM o WHERE o.kind <> 'deferred' AND d.id = o.id AND d.lease_owner = o.owner
         RETURNING d.id, d.status),
       deferred AS (
         UPDATE deliveries d SET next_attempt_at = o.next_attempt_at, lease_owner = NULL, updated_at = o.at
         FROM o WHERE o.kind = 'deferred' AND d.id = o.id AND d.lease_owner = o.owner),
       -- The overview's counters (see traffic-queries.ts), for the outcomes that applied.
       counted AS (
         INSERT INTO traffic_minutes (minute, metric, status, shard, count)
         SELECT (o.at / ${MINUTE_MS}) * ${MINUTE_MS}, 'deliveries', CASE o.kind WHEN 'retry' THEN 'retried' ELSE o.kind END,
           pg_backend_pid() % ${TRAFFIC_SHARDS}, count(*)
         FROM o WHERE o.id IN (SELECT id FROM finished)
         GROUP BY 1, 3
         ORDER BY 1, 3 -- one locking order for every commit (see tally)
         ON CONFLICT (minute, metric, status, shard) DO UPDATE SET count = traffic_minutes.count + excluded.count),
       attempts AS (
         INSERT INTO delivery_attempts (delivery_id, at, url, status_code, error, duration_ms, response, function_run)
         SELECT a.delivery_id, a.at, a.url, a.status_code, a.error, a.duration_ms, a.response, a.function_run
         FROM unnest($9::bigint[], $10::bigint[], $11::text[], $12::int[], $13::text[], $14::int[], $15::text[], $16::text[])
           WITH ORDINALITY AS a(delivery_id, at, url, status_code, error, duration_ms, response, function_run, ord)
         WHERE a.delivery_id IN (SELECT id FROM finished)
         ORDER BY a.ord)
       SELECT id FROM finished WHERE status <> 'pending'`,
      values: [o.id, o.owner, o.kind, o.at, o.firstAttemptAt, o.nextAttemptAt, o.retryUrls, o.lastError, a.deliveryId, a.at, a.url, a.statusCode, a.error, a.durationMs, a.response, a.functionRun],
    });
    return releaseSuccessors(
      client,
      ended.rows.map((row) => Number(row.id)),
      Math.max(...o.at),
    );
  }, 'BEGIN; SET LOCAL enable_seqscan = off');
}

export async function nextDeliveryDueAt(pool: pg.Pool): Promise<number | undefined> {
  const { rows } = await pool.query<{ due: number | null }>(`SELECT MIN(next_attempt_at) AS due FROM deliveries WHERE status = 'pending'`);
  return rows[0]?.due ?? undefined;
}

/**
 * Newest first, each with its message's body. A filter by user or messageId
 * starts from the messages it names (messages_by_user,
 * messages_by_message_id) and reaches their deliveries by
 * deliveries_by_message: it never walks the queue. Compared as
 * messages.user_id and message_id store them (textColumn).
 */
export async function listDeliveries(pool: pg.Pool, filter: DeliveryFilter): Promise<DeliveryRecord[]> {
  const values: unknown[] = [filter.sourceId ?? null, filter.status ?? null, filter.beforeId ?? null, filter.limit];
  const byMessage: string[] = [];
  if (filter.userId !== undefined) byMessage.push(`m.user_id = $${values.push(textColumn(filter.userId))}`);
  if (filter.messageId !== undefined) byMessage.push(`m.message_id = $${values.push(textColumn(filter.messageId))}`);
  const { rows } = await pool.query<DeliveryRow>(
    `SELECT d.*, m.message_id, m.body AS message_body FROM deliveries d ${byMessage.length > 0 ? 'JOIN' : 'LEFT JOIN'} messages m ON m.seq = d.message_seq
     WHERE ($1::text IS NULL OR d.source_id = $1)
       AND ($2::text IS NULL OR d.status = $2)
       AND ($3::bigint IS NULL OR d.id < $3)
       ${byMessage.map((condition) => `AND ${condition}`).join(' ')}
     ORDER BY d.id DESC LIMIT $4`,
    values,
  );
  return rows.map(toDeliveryRecord);
}

export async function getDelivery(pool: pg.Pool, id: number): Promise<DeliveryDetail | undefined> {
  const { rows } = await pool.query<DeliveryRow>(
    `SELECT d.*, m.message_id, m.body AS message_body FROM deliveries d LEFT JOIN messages m ON m.seq = d.message_seq WHERE d.id = $1`,
    [id],
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  const attempts = await pool.query<AttemptRow>(
    `SELECT at, url, status_code, error, duration_ms, response, function_run FROM delivery_attempts WHERE delivery_id = $1 ORDER BY id`,
    [id],
  );
  return { ...toDeliveryRecord(row), attempts: attempts.rows.map(toAttemptRecord) };
}

/** Runs in the caller's transaction, which also notifies when this requeued any. */
/** Retry now: a pending delivery waiting for its next attempt becomes due at `now` (a leased one is being sent already). */
export async function makeDeliveryDueNow(client: pg.ClientBase, id: number, now: number): Promise<boolean> {
  const result = await client.query(
    `UPDATE deliveries SET next_attempt_at = $1, updated_at = $1 WHERE id = $2 AND status = 'pending' AND lease_owner IS NULL AND next_attempt_at > $1`,
    [now, id],
  );
  return (result.rowCount ?? 0) > 0;
}

export async function requeueFailedDeliveries(client: pg.ClientBase, filter: RequeueFilter, now: number): Promise<number> {
  const result = await client.query(
    `UPDATE deliveries SET status = CASE WHEN transform_failed THEN 'transforming' ELSE 'pending' END, transform_failed = false,
       next_attempt_at = $1, first_attempt_at = NULL, retry_urls = NULL, lease_owner = NULL, updated_at = $1
     WHERE status = 'failed'
       AND ($2::bigint IS NULL OR id = $2)
       AND ($3::text IS NULL OR source_id = $3)
       AND ($4::bigint IS NULL OR updated_at >= $4)`,
    [now, filter.id ?? null, filter.sourceId ?? null, filter.since ?? null],
  );
  return result.rowCount ?? 0;
}

