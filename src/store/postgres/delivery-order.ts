// Ordered delivery on PostgreSQL: linking new deliveries behind their key's
// previous one, and releasing a delivery's successor when it ends. See
// docs/architecture.md, "Ordered delivery", for why each step is its own
// statement.
import type pg from 'pg';
import { type OrderedJob, chainJobs } from '../../domain/delivery-order.js';

/**
 * Links `jobs` (deliveries this transaction inserted with next_attempt_at
 * NULL, in creation order) behind their keys. Three statements whatever
 * their number:
 * 1. the keys' tails move to this transaction's last delivery of each, and
 *    the upsert returns what it replaced (prev_id). The upsert locks the tail
 *    row, so two nodes creating deliveries of one key queue here, and the
 *    second sees the first's committed delivery as its predecessor;
 * 2. the predecessors still pending are locked FOR SHARE (in id order): a
 *    finishing transaction updates a predecessor before it releases its
 *    successors, so either it already committed (the predecessor is no longer
 *    pending here and the new delivery is due at once) or it waits for this
 *    commit, and its release statement, which runs after, sees the successor;
 * 3. every job gets its link and, when nothing is before it, its due time.
 */
export async function linkOrdered(client: pg.ClientBase, jobs: readonly OrderedJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const { chained, heads } = chainJobs(jobs);
  const tails = [...heads.values()].sort((x, y) => (x.first.scope < y.first.scope ? -1 : x.first.scope > y.first.scope ? 1 : x.first.key < y.first.key ? -1 : x.first.key > y.first.key ? 1 : 0));
  const upserted = await client.query<{ scope: string; order_key: string; prev_id: string | null }>({
    name: 'switchyard_order_tails',
    text: `INSERT INTO delivery_tails (scope, order_key, delivery_id)
       SELECT t.scope, t.order_key, t.delivery_id FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS t(scope, order_key, delivery_id, ord) ORDER BY t.ord
       ON CONFLICT (scope, order_key) DO UPDATE SET prev_id = delivery_tails.delivery_id, delivery_id = excluded.delivery_id
       RETURNING scope, order_key, prev_id`,
    values: [tails.map((t) => t.first.scope), tails.map((t) => t.first.key), tails.map((t) => t.last.id)],
  });
  const previous = new Map<string, number>();
  for (const row of upserted.rows) if (row.prev_id !== null) previous.set(`${row.scope}\u0000${row.order_key}`, Number(row.prev_id));
  const alive = new Set<number>();
  if (previous.size > 0) {
    const locked = await client.query<{ id: string }>({
      name: 'switchyard_order_lock_previous',
      text: `SELECT id FROM deliveries WHERE id = ANY($1::bigint[]) AND status = 'pending' ORDER BY id FOR SHARE`,
      values: [[...previous.values()]],
    });
    for (const row of locked.rows) alive.add(Number(row.id));
  }
  const ids: number[] = [];
  const after: Array<number | null> = [];
  const due: Array<number | null> = [];
  for (const job of chained) {
    const before = job.before ?? previous.get(`${job.scope}\u0000${job.key}`);
    ids.push(job.id);
    after.push(before ?? null);
    due.push(before !== undefined && (job.before !== undefined || alive.has(before)) ? null : job.at);
  }
  await client.query({
    name: 'switchyard_order_link',
    text: `UPDATE deliveries d SET after_id = u.after_id, next_attempt_at = u.due
       FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(id, after_id, due) WHERE d.id = u.id`,
    values: [ids, after, due],
  });
}

/**
 * Makes the successors of deliveries that just ended due. Runs in the
 * transaction that recorded their outcomes, as a statement of its own after
 * them: its snapshot then includes any successor whose creation the outcome's
 * update waited for (see {@link linkOrdered}).
 */
export async function releaseSuccessors(client: pg.ClientBase, ended: readonly number[], at: number): Promise<number> {
  if (ended.length === 0) return 0;
  const result = await client.query({
    name: 'switchyard_order_release',
    text: `UPDATE deliveries SET next_attempt_at = $2, updated_at = $2
       WHERE after_id = ANY($1::bigint[]) AND status = 'pending' AND next_attempt_at IS NULL`,
    values: [ended, at],
  });
  return result.rowCount ?? 0;
}

/**
 * Forgets up to `limit` keys whose latest delivery has its final outcome
 * (or is gone): such a tail holds nobody back (see the SQLite twin). The
 * delete names the delivery it found in each tail: a tail that a
 * processing transaction moved to a new delivery meanwhile no longer
 * matches when the delete re-checks the row it waited for, and stays.
 */
export async function pruneEndedTails(pool: pg.Pool, limit: number): Promise<number> {
  const result = await pool.query(
    `WITH ended AS (
       SELECT t.scope, t.order_key, t.delivery_id FROM delivery_tails t LEFT JOIN deliveries d ON d.id = t.delivery_id
       WHERE d.id IS NULL OR d.status NOT IN ('pending', 'transforming') LIMIT $1)
     DELETE FROM delivery_tails t USING ended e
     WHERE t.scope = e.scope AND t.order_key = e.order_key AND t.delivery_id = e.delivery_id`,
    [limit],
  );
  return result.rowCount ?? 0;
}
