// The `raw_requests` table: what ingest stores before its 200, and the processing stage's reads and deletes.
import type pg from 'pg';
import type { AppendResult, IngestEntry, NewRawRequest, RawBacklog, RawRequest } from '../store.js';
import { textColumn } from './connection.js';
import { appendMessages } from './message-queries.js';

interface RawRow {
  seq: string;
  source_id: string;
  route: string;
  received_at: string;
  ip: string | null;
  config_version: string;
  message_count: number;
  headers: string | null;
  body: string;
}

/** One statement whatever their number, in the caller's transaction. */
export async function appendRawRequests(client: pg.ClientBase, requests: readonly NewRawRequest[]): Promise<void> {
  await client.query(
    `INSERT INTO raw_requests (source_id, route, received_at, ip, config_version, message_count, headers, body)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::int[], $7::text[], $8::text[])`,
    [
      requests.map((r) => r.sourceId),
      requests.map((r) => r.route),
      requests.map((r) => r.receivedAt),
      requests.map((r) => textColumn(r.ip)),
      requests.map((r) => r.configVersion),
      requests.map((r) => r.messageCount),
      requests.map((r) => textColumn(r.headers)),
      requests.map((r) => r.body),
    ],
  );
}

/**
 * Takes the oldest raw rows no other node holds (`FOR UPDATE SKIP LOCKED`:
 * a node processing a row keeps it locked until its commit deletes it, so
 * no two nodes ever process one row), stores their messages and deletes
 * them, in the caller's transaction.
 */
export async function processRawRequests(
  client: pg.ClientBase,
  limits: { readonly maxRequests: number; readonly maxMessages: number },
  build: (requests: readonly RawRequest[]) => ReadonlyArray<readonly IngestEntry[]>,
  dedupeSince: number,
): Promise<{ requests: number; results: AppendResult[]; entries: readonly IngestEntry[]; deliveriesAdded: boolean }> {
  // Sizes first, bodies only of the rows taken: a batch's row is tens of KB.
  const { rows } = await client.query<{ seq: number; message_count: number }>(
    `SELECT seq, message_count FROM raw_requests ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [limits.maxRequests],
  );
  const seqs: number[] = [];
  let messages = 0;
  for (const row of rows) {
    if (seqs.length > 0 && messages + row.message_count > limits.maxMessages) break;
    messages += row.message_count;
    seqs.push(Number(row.seq));
  }
  if (seqs.length === 0) return { requests: 0, results: [], entries: [], deliveriesAdded: false };
  const bodies = await client.query<RawRow>(`SELECT * FROM raw_requests WHERE seq = ANY($1::bigint[]) ORDER BY seq`, [seqs]);
  const taken = bodies.rows.map(toRawRequest);
  const entries = build(taken).flat();
  const { results, deliveriesAdded } = entries.length === 0 ? { results: [], deliveriesAdded: false } : await appendMessages(client, entries, dedupeSince);
  await client.query(`DELETE FROM raw_requests WHERE seq = ANY($1::bigint[])`, [seqs]);
  return { requests: taken.length, results, entries, deliveriesAdded };
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

function toRawRequest(row: RawRow): RawRequest {
  return {
    seq: Number(row.seq),
    sourceId: row.source_id,
    route: row.route,
    receivedAt: Number(row.received_at),
    ip: row.ip ?? undefined,
    configVersion: Number(row.config_version),
    messageCount: row.message_count,
    headers: row.headers ?? undefined,
    body: row.body,
  };
}
