// The `raw_requests` table: what ingest stores before its 200, and the processing stage's reads and deletes.
import { type OrderedJob, destinationScope } from '../../domain/delivery-order.js';
import { linkOrdered } from './delivery-order.js';
import type pg from 'pg';
import { tally } from '../../domain/traffic.js';
import { type AppendResult, type IngestEntry, type NewRawRequest, ProcessingLockNeeded, type RawBacklog, type RawRequest, type StoreTopic } from '../store.js';
import { notifyCalls } from './change-listener.js';
import { type RawRequestRow, toRawRequest } from '../rows.js';
import { textColumn } from './connection.js';
import { dedupe, messageColumns, messageRows, traceparentColumn } from './message-queries.js';
import { TRAFFIC_SHARDS } from './traffic-queries.js';
import { recordObservations } from './observation-queries.js';
import { WRITE_BEGIN } from './settled-seq.js';

/**
 * The hot statements here are named, so each pooled connection parses and
 * plans them once (a prepared statement) instead of on every call. A named
 * statement lists its result columns: a prepared `*` would fail once a
 * migration adds a column under a running node.
 *
 * Bodies (and headers) go in as one JSON array, not a `text[]`: pg's
 * array literal escapes each element with two regular expressions, ~6x the
 * CPU of JSON.stringify, and a batch's bodies are tens of KB.
 */
const RAW_COLUMNS = 'r.seq, r.source_id, r.route, r.received_at, r.ip, r.config_version, r.message_count, r.headers, r.body';

/**
 * One statement whatever their number, committed on its own: no BEGIN and
 * COMMIT round trips (a statement outside a transaction is one). It also
 * sends the `raw` notification, delivered at that commit.
 */
export async function appendRawRequests(pool: pg.Pool, requests: readonly NewRawRequest[], nodeId: string): Promise<void> {
  const notify = notifyCalls(['raw'], nodeId, 8);
  const { rows } = await pool.query<{ inserted: number }>({
    name: 'switchyard_append_raw',
    text: `WITH inserted AS (
       INSERT INTO raw_requests (source_id, route, received_at, ip, config_version, message_count, headers, body)
       SELECT * FROM ROWS FROM (
         unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::int[]),
         json_array_elements_text($7::json), json_array_elements_text($8::json))
       RETURNING 1)
     SELECT (SELECT count(*)::int FROM inserted) AS inserted, ${notify.calls}`,
    values: [
      requests.map((r) => r.sourceId),
      requests.map((r) => r.route),
      requests.map((r) => r.receivedAt),
      requests.map((r) => textColumn(r.ip)),
      requests.map((r) => r.configVersion),
      requests.map((r) => r.messageCount),
      JSON.stringify(requests.map((r) => textColumn(r.headers))),
      JSON.stringify(requests.map((r) => r.body)),
      ...notify.values,
    ],
  });
  if (rows[0]?.inserted !== requests.length) throw new Error(`stored ${rows[0]?.inserted} raw requests of ${requests.length}`);
}

/**
 * How a processing transaction begins: as every transaction that may insert
 * messages ({@link WRITE_BEGIN}), and with sequential scans off. The raw
 * rows it took are deleted by seq, and on a table whose statistics predate
 * the backlog (a fresh table, or one that filled since autovacuum last
 * analyzed it) the planner read every unprocessed request to find them,
 * O(backlog) per batch where the backlog is what processing has to catch
 * up on (seen with auto_explain; see claimDeliveries).
 */
export const PROCESS_RAW_BEGIN = `${WRITE_BEGIN}; SET LOCAL enable_seqscan = off`;

/**
 * Key of the transaction-level advisory lock that makes processing one node
 * at a time while ordered destinations exist (see {@link PROCESS_RAW_LOCKED_BEGIN}).
 */
const PROCESSING_LOCK = 7_230_465_012;

/**
 * How a processing transaction that may link ordered deliveries begins: it
 * takes {@link PROCESSING_LOCK} first, in the same round trip, so nodes
 * process raw requests one transaction at a time, in seq order. Ordered
 * delivery needs it: a key's deliveries chain in the order their
 * processing transactions pass the tail upsert, and that must be the order
 * of the requests. With two processors at once, one took the oldest rows
 * and the other (SKIP LOCKED) the next ones, and whichever linked first put
 * its messages first: a key's messages of request n+1 were sent before
 * those of request n. The take runs after the lock in a statement of its
 * own, so under READ COMMITTED its snapshot includes the previous holder's
 * commit (its raw rows gone, its tails moved). While no source has an
 * ordered destination, transactions begin without it and nodes process
 * side by side; one that finds it must link after all (the config changed
 * under it) rolls back with ProcessingLockNeeded and is tried again locked.
 */
export const PROCESS_RAW_LOCKED_BEGIN = `${PROCESS_RAW_BEGIN}; SELECT pg_advisory_xact_lock(${PROCESSING_LOCK})`;

/**
 * Takes the oldest raw rows no other node holds (`FOR UPDATE SKIP LOCKED`:
 * a node processing a row keeps it locked until its commit deletes it, so
 * no two nodes ever process one row), stores their messages and deletes
 * them, in the caller's transaction (begun with {@link PROCESS_RAW_LOCKED_BEGIN} when `locked`). Three statements whatever their number
 * (two when no entry needs de-duplication): take, de-duplicate, and one that
 * writes the messages, their delivery jobs and traffic counts, deletes the
 * raw rows and notifies `topics(…)` (delivered at the caller's commit).
 *
 * `caughtUp` when it took every row it locked and locked fewer than
 * `maxRequests`: the take's snapshot held no other row free to take. A row
 * committed after it notifies `raw` at its commit, which makes the processor
 * pass again; a row another node holds is that node's to process. Without
 * it, every drain ended with a pass that found nothing (BEGIN, take, COMMIT).
 */
export async function processRawRequests(
  client: pg.ClientBase,
  limits: { readonly maxRequests: number; readonly maxMessages: number },
  build: (requests: readonly RawRequest[]) => ReadonlyArray<readonly IngestEntry[]>,
  dedupeSince: number,
  notify: { readonly nodeId: string; readonly topics: (deliveriesAdded: boolean) => readonly StoreTopic[] },
  locked: boolean,
): Promise<{ requests: number; results: AppendResult[]; deliveriesAdded: boolean; caughtUp: boolean }> {
  // Locks up to maxRequests rows, but reads the bodies (a batch's row is
  // tens of KB) only of those taken: the oldest, as many as fit in
  // maxMessages, at least one. The rest stay locked until the commit.
  const taken = await client.query<RawRequestRow & { locked: number }>({
    name: 'switchyard_take_raw_counted',
    text: `WITH locked AS (
       SELECT seq, message_count FROM raw_requests ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED),
     sized AS (
       SELECT seq, row_number() OVER (ORDER BY seq) AS n, sum(message_count) OVER (ORDER BY seq) AS upto,
         count(*) OVER () AS locked FROM locked)
     SELECT ${RAW_COLUMNS}, sized.locked::int AS locked FROM sized JOIN raw_requests r USING (seq)
     WHERE sized.n = 1 OR sized.upto <= $2
     ORDER BY r.seq`,
    values: [limits.maxRequests, limits.maxMessages],
  });
  if (taken.rows.length === 0) return { requests: 0, results: [], deliveriesAdded: false, caughtUp: true };
  const caughtUp = taken.rows[0]!.locked < limits.maxRequests && taken.rows.length === taken.rows[0]!.locked;
  const requests = taken.rows.map(toRawRequest);
  const entries = build(requests).flat();
  const statuses = await dedupe(client, entries, dedupeSince);

  const jobs = { entries: [] as number[], sourceIds: [] as string[], destinations: [] as string[], at: [] as number[], ordered: [] as boolean[] };
  const ordered: Array<Omit<OrderedJob, 'id'>> = [];
  entries.forEach((entry, i) => {
    if (statuses[i] !== 'accepted') return;
    for (const destination of entry.destinations) {
      jobs.entries.push(i + 1);
      jobs.sourceIds.push(entry.sourceId);
      jobs.destinations.push(destination);
      jobs.at.push(entry.receivedAt);
      // Ordered, a transformed delivery takes its place in its key's chain
      // now; the transform stage decides when it falls due.
      const key = destination === 'webhooks' ? entry.orderKey : undefined;
      jobs.ordered.push(key !== undefined);
      if (key !== undefined) ordered.push({ scope: destinationScope(entry.sourceId), key, at: entry.receivedAt });
    }
  });
  if (ordered.length > 0 && !locked) throw new ProcessingLockNeeded();
  const deliveriesAdded = jobs.entries.length > 0;
  const counts = tally(entries.map((entry, i) => ({ at: entry.receivedAt, status: statuses[i]! })));
  const notified = notifyCalls(notify.topics(deliveriesAdded), notify.nodeId, 18);
  // ORDER BY ord makes the identity hand out seqs in the order of `entries`,
  // so the n-th smallest seq is the n-th entry's: the delivery jobs name
  // their entry by its position, and the returned seqs, sorted, line up.
  const { rows } = await client.query<{ seqs: number[] | null; jobs: number; deleted: number; ordered: string[] | null }>({
    name: `switchyard_process_raw_o_${notify.topics(deliveriesAdded).join('_')}`,
    text: `WITH stored AS (
       INSERT INTO messages (source_id, status, reason, type, message_id, user_id, received_at, body, traceparent)
       SELECT source_id, status, reason, type, message_id, user_id, received_at, body, traceparent
       FROM ${messageRows(18)}
       ORDER BY ord
       RETURNING seq),
     numbered AS (
       SELECT seq, row_number() OVER (ORDER BY seq) AS ord FROM stored),
     queued AS (
       INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at)
       SELECT j.source_id, numbered.seq, j.destination, 'pending', CASE WHEN j.ordered THEN NULL ELSE j.at END, j.at, j.at
       FROM unnest($9::bigint[], $10::text[], $11::text[], $12::bigint[], $17::boolean[]) WITH ORDINALITY AS j(entry, source_id, destination, at, ordered, ord)
         JOIN numbered ON numbered.ord = j.entry
       ORDER BY j.ord
       RETURNING id, next_attempt_at IS NULL AS ordered),
     deleted AS (
       DELETE FROM raw_requests WHERE seq = ANY($13::bigint[]) RETURNING 1),
     counted AS (
       INSERT INTO traffic_minutes (minute, metric, status, shard, count)
       SELECT minute, 'messages', status, pg_backend_pid() % ${TRAFFIC_SHARDS}, count
       FROM unnest($14::bigint[], $15::text[], $16::bigint[]) WITH ORDINALITY AS c(minute, status, count, ord)
       ORDER BY c.ord
       ON CONFLICT (minute, metric, status, shard) DO UPDATE SET count = traffic_minutes.count + excluded.count)
     SELECT (SELECT array_agg(seq ORDER BY seq) FROM stored) AS seqs,
       (SELECT count(*)::int FROM queued) AS jobs,
       (SELECT array_agg(id ORDER BY id) FROM queued WHERE ordered) AS ordered,
       (SELECT count(*)::int FROM deleted) AS deleted${notified.calls === '' ? '' : `, ${notified.calls}`}`,
    values: [
      ...messageColumns(entries, statuses),
      jobs.entries,
      jobs.sourceIds,
      jobs.destinations,
      jobs.at,
      requests.map((r) => r.seq),
      counts.map((c) => c.minute),
      counts.map((c) => c.status),
      counts.map((c) => c.count),
      jobs.ordered,
      traceparentColumn(entries),
      ...notified.values,
    ],
  });
  const row = rows[0]!;
  const seqs = (row.seqs ?? []).map(Number);
  // The rows are locked by this transaction, so every one is there to delete.
  if (seqs.length !== entries.length || row.jobs !== jobs.entries.length || row.deleted !== requests.length) {
    throw new Error(
      `processing stored ${seqs.length} messages of ${entries.length}, ${row.jobs} delivery jobs of ${jobs.entries.length}, deleted ${row.deleted} raw requests of ${requests.length}`,
    );
  }
  // The identity handed out ids in the order of the jobs (ORDER BY j.ord).
  const orderedIds = (row.ordered ?? []).map(Number);
  if (orderedIds.length !== ordered.length) throw new Error(`processing queued ${orderedIds.length} ordered deliveries of ${ordered.length}`);
  await linkOrdered(client, ordered.map((job, i) => ({ ...job, id: orderedIds[i]! })));
  // The observed schema and violation counts, added up per batch, in this transaction.
  await recordObservations(client, entries, statuses);
  // Deliveries of a transformed destination wait for the transform stage (not claimable), in this same transaction.
  const transforming = seqs.filter((_, i) => statuses[i] === 'accepted' && entries[i]!.transforming === true);
  if (transforming.length > 0) {
    await client.query(`UPDATE deliveries SET status = 'transforming' WHERE message_seq = ANY($1::bigint[]) AND destination = 'webhooks' AND status = 'pending'`, [transforming]);
  }
  return { requests: requests.length, results: seqs.map((seq, i) => ({ seq, status: statuses[i]! })), deliveriesAdded, caughtUp };
}

export async function rawBacklog(pool: pg.Pool): Promise<RawBacklog> {
  const { rows } = await pool.query<{ requests: string; messages: string; oldest: string | null }>(
    `SELECT count(*) AS requests, coalesce(sum(message_count), 0) AS messages, min(received_at) AS oldest FROM raw_requests`,
  );
  const row = rows[0]!;
  return { requests: Number(row.requests), messages: Number(row.messages), oldestReceivedAt: row.oldest === null ? undefined : Number(row.oldest) };
}

/**
 * The highest seq of a raw request stored and not yet processed, 0 when none
 * is: see Store.highestRawSeq. Run by a statement whose snapshot follows the
 * commit of every request acknowledged before it (READ COMMITTED: any
 * statement that starts after); the identity never hands a seq out twice.
 */
export const HIGHEST_RAW_SEQ = `SELECT coalesce(max(seq), 0) AS seq FROM raw_requests`;

export async function highestRawSeq(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ seq: string }>(HIGHEST_RAW_SEQ);
  return Number(rows[0]!.seq);
}

export async function hasRawRequestsUpTo(pool: pg.Pool, seq: number): Promise<boolean> {
  const { rows } = await pool.query(`SELECT 1 FROM raw_requests WHERE seq <= $1 LIMIT 1`, [seq]);
  return rows.length > 0;
}
