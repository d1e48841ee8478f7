// Ordered delivery on PostgreSQL: linking new deliveries behind their key's
// previous one, and releasing a delivery's successor when it ends. See
// docs/architecture.md, "Ordered delivery", for why each step is its own
// statement.
import type pg from 'pg';
import { type OrderPlace, type OrderedJob, chainJobs, compareScopeKey } from '../../domain/delivery-order.js';

/**
 * Links `jobs` (deliveries this transaction inserted with next_attempt_at
 * NULL, in creation order) behind their keys. Three statements whatever
 * their number:
 * 1. the keys' tails move to this transaction's last delivery of each, and
 *    the upsert returns what it replaced (prev_id). The upsert locks the tail
 *    row, so two nodes creating deliveries of one key queue here, and the
 *    second sees the first's committed delivery as its predecessor;
 * 2. the predecessors still open (`pending`, or `transforming`) are locked
 *    FOR SHARE (in id order): a finishing transaction (a delivery's outcome,
 *    or its transformation's) updates a predecessor before it releases or
 *    relinks its successors, so either it already committed (a predecessor
 *    no longer open here: the new delivery is due at once; one that became
 *    `pending`: still open, it waits) or it waits for this commit, and its
 *    release statement, which runs after, sees the successor;
 * 3. every job gets its link and, when nothing is before it, its due time.
 */
export async function linkOrdered(client: pg.ClientBase, jobs: readonly OrderedJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const { chained, heads } = chainJobs(jobs);
  // In (scope, key) order: the transform stage locks the tails it moves in the same order.
  const tails = [...heads.values()].sort((x, y) => compareScopeKey(x.first, y.first));
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
      text: `SELECT id FROM deliveries WHERE id = ANY($1::bigint[]) AND status IN ('pending', 'transforming') ORDER BY id FOR SHARE`,
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
 * Locks, before anything else of a transaction that may pass deliveries'
 * places on (their transformation dropped or failed them), the tails that
 * name them, in the order processing's tail upsert takes tails: a pass-on
 * that moves a tail then never holds a delivery a creator waits to lock
 * FOR SHARE while it waits for that creator's tail.
 */
export async function lockTailsNaming(client: pg.ClientBase, leaving: ReadonlyArray<{ readonly id: number; readonly place: OrderPlace }>): Promise<void> {
  if (leaving.length === 0) return;
  const sorted = [...leaving].sort((x, y) => compareScopeKey(x.place, y.place));
  await client.query({
    name: 'switchyard_order_lock_tails',
    text: `SELECT 1 FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(scope, order_key, delivery_id, ord)
       JOIN delivery_tails t ON t.scope = u.scope AND t.order_key = u.order_key AND t.delivery_id = u.delivery_id
       ORDER BY u.ord FOR UPDATE OF t`,
    values: [sorted.map((d) => d.place.scope), sorted.map((d) => d.place.key), sorted.map((d) => d.id)],
  });
}

/**
 * Whether the delivery is open (`pending` or `transforming`); if so, locked
 * FOR SHARE until this transaction ends, so its own outcome's release, a
 * statement after its update, sees what this transaction links to it (the
 * creator's pattern, see {@link linkOrdered}). Not open: final or gone.
 */
export async function lockIfOpen(client: pg.ClientBase, id: number): Promise<boolean> {
  const { rowCount } = await client.query({
    name: 'switchyard_order_lock_open',
    text: `SELECT 1 FROM deliveries WHERE id = $1 AND status IN ('pending', 'transforming') FOR SHARE`,
    values: [id],
  });
  return (rowCount ?? 0) > 0;
}

/**
 * Whether a delivery that waits for none is part of a key's chain: its
 * key's tail names it, or one waits for it (see the SQLite twin).
 */
export async function isChainHead(client: pg.ClientBase, id: number, place: OrderPlace | undefined): Promise<boolean> {
  const { rows } = await client.query<{ chained: boolean }>({
    name: 'switchyard_order_chained',
    text: `SELECT EXISTS (SELECT 1 FROM delivery_tails WHERE scope = $2 AND order_key = $3 AND delivery_id = $1)
         OR EXISTS (SELECT 1 FROM deliveries WHERE after_id = $1 AND status = 'pending' AND next_attempt_at IS NULL)
         OR EXISTS (SELECT 1 FROM deliveries WHERE after_id = $1 AND status = 'transforming') AS chained`,
    values: [id, place?.scope ?? null, place?.key ?? null],
  });
  return rows[0]!.chained;
}

/**
 * A delivery its transformation dropped (deleted) or failed on (never to be
 * sent) hands its place to its predecessor `afterId`: what waited for it
 * (pending, or still transforming) waits for that one instead (due at `at`
 * when that one is final, gone, or there is none), and its key's tail, if
 * it names it (locked by {@link lockTailsNaming}), names that one or goes.
 * The predecessor is locked FOR SHARE first when open, so its own outcome
 * (which waits) releases the relinked deliveries; when it is not, they are
 * due now.
 */
export async function passOn(client: pg.ClientBase, goneId: number, afterId: number | null, place: OrderPlace | undefined, at: number): Promise<void> {
  const open = afterId !== null && (await lockIfOpen(client, afterId));
  await client.query({
    name: 'switchyard_order_pass_on',
    text: `UPDATE deliveries SET after_id = $2,
         next_attempt_at = CASE WHEN status = 'pending' AND NOT $3 THEN $4::bigint ELSE next_attempt_at END,
         updated_at = CASE WHEN status = 'pending' THEN $4::bigint ELSE updated_at END
       WHERE after_id = $1 AND ((status = 'pending' AND next_attempt_at IS NULL) OR status = 'transforming')`,
    values: [goneId, afterId, open, at],
  });
  if (place === undefined) return;
  if (open) {
    await client.query({
      name: 'switchyard_order_tail_to',
      text: `UPDATE delivery_tails SET delivery_id = $4 WHERE scope = $1 AND order_key = $2 AND delivery_id = $3`,
      values: [place.scope, place.key, goneId, afterId],
    });
  } else {
    await client.query({
      name: 'switchyard_order_tail_gone',
      text: `DELETE FROM delivery_tails WHERE scope = $1 AND order_key = $2 AND delivery_id = $3`,
      values: [place.scope, place.key, goneId],
    });
  }
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
