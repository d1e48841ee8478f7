// Ingest's writes and the debugger's reads of the `messages` table.
import { type OrderedJob, destinationScope } from '../../domain/delivery-order.js';
import { linkOrdered, pruneEndedTails } from './delivery-order.js';
import type pg from 'pg';
import type { MessageStatus } from '../../domain/message.js';
import type { AppendResult, IngestEntry, StoredMessage } from '../store.js';
import { textColumn } from './connection.js';
import { type MessageRow, toStoredMessage } from '../rows.js';

const PRUNE_BATCH = 2_000;

/** A Map key for (source, messageId) that no two different pairs share. */
const dedupeKey = (sourceId: string, messageId: string): string => `${sourceId.length}:${sourceId}${messageId}`;

/**
 * Writes `entries` in the transaction `client` has open, a few statements
 * whatever their number; returns the results, and whether delivery jobs were
 * created.
 */
export async function appendMessages(
  client: pg.ClientBase,
  entries: readonly IngestEntry[],
  dedupeSince: number,
): Promise<{ results: AppendResult[]; deliveriesAdded: boolean }> {
  const statuses = await dedupe(client, entries, dedupeSince);
  const { seqs, deliveriesAdded } = await insertMessages(client, entries, statuses);
  return { results: seqs.map((seq, i) => ({ seq, status: statuses[i]! })), deliveriesAdded };
}

/**
 * The new `messages` rows of a statement whose parameters $1–$8 are
 * {@link messageColumns}, in the order of the entries (`ord`). Bodies come as
 * one JSON array: pg's `text[]` literal escapes each element with two
 * regular expressions, ~6x the CPU of JSON.stringify.
 */
export function messageRows(traceparentsParam: number): string {
  return `ROWS FROM (
         unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[]), json_array_elements_text($8::json), unnest($${traceparentsParam}::text[]))
         WITH ORDINALITY AS e(source_id, status, reason, type, message_id, user_id, received_at, body, traceparent, ord)`;
}

/**
 * The parameters $1–$8 of {@link messageRows}; the traceparents
 * ({@link traceparentColumn}) go in the parameter it names, after the
 * caller's own.
 */
export function messageColumns(entries: readonly IngestEntry[], statuses: readonly MessageStatus[]): unknown[] {
  return [
    entries.map((e) => e.sourceId),
    statuses,
    entries.map((e) => textColumn(e.reason)),
    entries.map((e) => textColumn(e.type)),
    entries.map((e) => textColumn(e.messageId)),
    entries.map((e) => textColumn(e.userId)),
    entries.map((e) => e.receivedAt),
    JSON.stringify(entries.map((e) => e.body)),
  ];
}

/** The entries' traceparents, null where none (tracing off: all null). */
export function traceparentColumn(entries: readonly IngestEntry[]): Array<string | null> {
  return entries.map((e) => e.traceparent ?? null);
}

/**
 * Stores `entries` with the given statuses, and a pending delivery to each
 * destination of the accepted ones, due at its receivedAt; no
 * de-duplication. Two statements whatever their number, in the caller's
 * transaction. Returns their seqs in the order of `entries`.
 */
export async function insertMessages(
  client: pg.ClientBase,
  entries: readonly IngestEntry[],
  statuses: readonly MessageStatus[],
): Promise<{ seqs: number[]; deliveriesAdded: boolean }> {
  if (entries.length === 0) return { seqs: [], deliveriesAdded: false };
  // ORDER BY ord makes the identity hand out seqs in the order of
  // `entries`; sorting the returned seqs then lines them up with it.
  const inserted = await client.query<{ seq: number }>(
    `INSERT INTO messages (source_id, status, reason, type, message_id, user_id, received_at, body, traceparent)
     SELECT source_id, status, reason, type, message_id, user_id, received_at, body, traceparent
     FROM ${messageRows(9)}
     ORDER BY ord
     RETURNING seq`,
    [...messageColumns(entries, statuses), traceparentColumn(entries)],
  );
  const seqs = inserted.rows.map((row) => row.seq).sort((a, b) => a - b);
  if (seqs.length !== entries.length) throw new Error(`inserted ${seqs.length} messages for ${entries.length} entries`);

  const jobs = { sourceIds: [] as string[], seqs: [] as number[], destinations: [] as string[], at: [] as number[], ordered: [] as boolean[] };
  const ordered: Array<Omit<OrderedJob, 'id'>> = [];
  entries.forEach((entry, i) => {
    if (statuses[i] !== 'accepted') return;
    for (const destination of entry.destinations) {
      jobs.sourceIds.push(entry.sourceId);
      jobs.seqs.push(seqs[i]!);
      jobs.destinations.push(destination);
      jobs.at.push(entry.receivedAt);
      const key = destination === 'webhooks' ? entry.orderKey : undefined;
      jobs.ordered.push(key !== undefined);
      if (key !== undefined) ordered.push({ scope: destinationScope(entry.sourceId), key, at: entry.receivedAt });
    }
  });
  if (jobs.seqs.length > 0) {
    // Ordered ones start with no due time; linkOrdered gives them theirs.
    const queued = await client.query<{ id: string; ordered: boolean }>(
      `INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at)
       SELECT source_id, message_seq, destination, 'pending', CASE WHEN ordered THEN NULL ELSE at END, at, at
       FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::boolean[]) WITH ORDINALITY AS j(source_id, message_seq, destination, at, ordered, ord)
       ORDER BY ord
       RETURNING id, next_attempt_at IS NULL AS ordered`,
      [jobs.sourceIds, jobs.seqs, jobs.destinations, jobs.at, jobs.ordered],
    );
    const orderedIds = queued.rows.filter((row) => row.ordered).map((row) => Number(row.id)).sort((a, b) => a - b);
    await linkOrdered(client, ordered.map((job, i) => ({ ...job, id: orderedIds[i]! })));
  }
  return { seqs, deliveriesAdded: jobs.seqs.length > 0 };
}

/**
 * The status each entry is stored with. One upsert marks the first
 * sighting of each messageId in the call (PostgreSQL refuses to upsert one
 * row twice in a statement); later sightings in the same call are decided
 * here exactly as one upsert per entry would decide them.
 */
export async function dedupe(client: pg.ClientBase, entries: readonly IngestEntry[], dedupeSince: number): Promise<MessageStatus[]> {
  const statuses: MessageStatus[] = entries.map((e) => e.status);
  const firsts = new Map<string, { index: number; sourceId: string; messageId: string }>();
  const later: Array<{ index: number; key: string }> = [];
  entries.forEach((entry, index) => {
    if (entry.status !== 'accepted' || entry.messageId === undefined) return;
    const messageId = textColumn(entry.messageId)!;
    const key = dedupeKey(entry.sourceId, messageId);
    if (firsts.has(key)) later.push({ index, key });
    else firsts.set(key, { index, sourceId: entry.sourceId, messageId });
  });
  if (firsts.size === 0) return statuses;

  // Keys in one sorted order on every node, so that two nodes upserting
  // overlapping keys wait for each other instead of deadlocking.
  const rows = [...firsts.values()].sort((a, b) =>
    a.sourceId === b.sourceId ? compare(a.messageId, b.messageId) : compare(a.sourceId, b.sourceId),
  );
  // An expired key is taken over, so the upsert returns a row exactly when
  // the messageId was not seen within the window.
  const fresh = await client.query<{ source_id: string; message_id: string }>({
    // Named: prepared once per connection (see raw-queries.ts).
    name: 'switchyard_dedupe',
    text: `INSERT INTO dedupe_keys (source_id, message_id, seen_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
     ON CONFLICT (source_id, message_id) DO UPDATE SET seen_at = excluded.seen_at
     WHERE dedupe_keys.seen_at < $4
     RETURNING source_id, message_id`,
    values: [rows.map((r) => r.sourceId), rows.map((r) => r.messageId), rows.map((r) => entries[r.index]!.receivedAt), dedupeSince],
  });
  const freshKeys = new Set(fresh.rows.map((row) => dedupeKey(row.source_id, row.message_id)));
  // What each key's seen_at now is; a key that was not taken over was seen
  // within the window, which later sightings in this call cannot change.
  const seenAt = new Map<string, number>();
  for (const [key, first] of firsts) {
    if (freshKeys.has(key)) seenAt.set(key, entries[first.index]!.receivedAt);
    else statuses[first.index] = 'duplicate';
  }

  // A later sighting is new again only when the earlier one in this call
  // is itself older than the window (a receivedAt before dedupeSince).
  const retaken = new Map<string, { sourceId: string; messageId: string; seenAt: number }>();
  for (const { index, key } of later) {
    const at = seenAt.get(key);
    if (at === undefined || at >= dedupeSince) {
      statuses[index] = 'duplicate';
      continue;
    }
    const entry = entries[index]!;
    seenAt.set(key, entry.receivedAt);
    retaken.set(key, { sourceId: entry.sourceId, messageId: firsts.get(key)!.messageId, seenAt: entry.receivedAt });
  }
  if (retaken.size > 0) {
    const keys = [...retaken.values()];
    await client.query(
      `UPDATE dedupe_keys d SET seen_at = k.seen_at
       FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(source_id, message_id, seen_at)
       WHERE d.source_id = k.source_id AND d.message_id = k.message_id`,
      [keys.map((k) => k.sourceId), keys.map((k) => k.messageId), keys.map((k) => k.seenAt)],
    );
  }
  return statuses;
}

export async function highestMessageSeq(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ seq: string }>(`SELECT coalesce(max(seq), 0) AS seq FROM messages`);
  return Number(rows[0]!.seq);
}

export async function listRecentMessages(pool: pg.Pool, sourceId: string, limit: number): Promise<StoredMessage[]> {
  const { rows } = await pool.query<MessageRow>(`SELECT * FROM messages WHERE source_id = $1 ORDER BY seq DESC LIMIT $2`, [sourceId, limit]);
  return rows.map(toStoredMessage);
}

export async function listMessagesAfter(pool: pg.Pool, sourceId: string, afterSeq: number, limit: number, uptoSeq: number): Promise<StoredMessage[]> {
  const { rows } = await pool.query<MessageRow>(`SELECT * FROM messages WHERE source_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`, [
    sourceId,
    afterSeq,
    uptoSeq,
    limit,
  ]);
  return rows.map(toStoredMessage);
}

export async function countMessages(pool: pg.Pool, sourceId: string, afterSeq: number, beforeSeq: number | undefined): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(
    `SELECT count(*) FROM messages WHERE source_id = $1 AND seq > $2 AND ($3::bigint IS NULL OR seq < $3)`,
    [sourceId, afterSeq, beforeSeq ?? null],
  );
  return rows[0]!.count;
}

/**
 * Deletes one batch of old rows per table, each in its own short statement
 * so that no lock on a hot table is held for long; returns how many rows
 * went. Conditions are repeated on the deleted rows themselves: PostgreSQL
 * re-checks those against a row changed meanwhile (a delivery requeued, a
 * messageId seen again), which it does not do for the sub-select.
 */
export async function pruneBatch(pool: pg.Pool, before: number, dedupeBefore: number): Promise<number> {
  const deliveries = await pool.query<{ removed: number }>(
    `WITH gone AS (
       DELETE FROM deliveries WHERE status <> 'pending' AND created_at < $1 AND id IN (
         SELECT id FROM deliveries WHERE status <> 'pending' AND created_at < $1 ORDER BY id LIMIT $2)
       RETURNING id),
     attempts AS (
       DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM gone) RETURNING 1)
     SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM attempts) AS removed`,
    [before, PRUNE_BATCH],
  );
  const messages = await pool.query(
    `DELETE FROM messages WHERE seq IN (
       SELECT seq FROM messages m WHERE received_at < $1
         AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_seq = m.seq)
       LIMIT $2)`,
    [before, PRUNE_BATCH],
  );
  const keys = await pool.query(
    `DELETE FROM dedupe_keys d USING (
       SELECT source_id, message_id FROM dedupe_keys WHERE seen_at < $1 LIMIT $2) old
     WHERE d.source_id = old.source_id AND d.message_id = old.message_id AND d.seen_at < $1`,
    [dedupeBefore, PRUNE_BATCH],
  );
  const tails = await pruneEndedTails(pool, PRUNE_BATCH);
  return deliveries.rows[0]!.removed + (messages.rowCount ?? 0) + (keys.rowCount ?? 0) + tails;
}

/** Code-unit order, the same in every process (unlike a locale-aware compare). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

