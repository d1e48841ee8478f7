// The observed schema and violation counts (see src/store/observation-records.ts), written inside the processing transaction.
import type pg from 'pg';
import type { MessageStatus } from '../../domain/message.js';
import { capObserved, eventKey, type ObservedEventRow, type ObservedPathRow, type ObservedPosition, pathKey, UNRECORDED_TYPE } from '../../domain/observed-schema.js';
import { capViolations, type ViolationRows, violationRowKey } from '../../domain/plan-violation-counts.js';
import { observeEntries } from '../observation-records.js';
import type { IngestEntry } from '../store.js';

/**
 * What is held for a batch's keys, in one statement: events per (source,
 * day), which of the batch's events and paths exist, paths per existing
 * event, violation rows per (source, hour) and which of the batch's exist.
 */
const HELD = `
  WITH ek AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) AS k(source_id, day, type, event)),
  pk AS (SELECT * FROM unnest($5::text[], $6::bigint[], $7::text[], $8::text[], $9::text[]) AS k(source_id, day, type, event, path)),
  vk AS (SELECT * FROM unnest($10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[]) AS k(source_id, hour, type, event, violation))
  SELECT 'd' AS kind, o.source_id, o.day AS at, NULL::text AS type, NULL::text AS event, NULL::text AS name, count(*)::int AS n
    FROM observed_events o JOIN (SELECT DISTINCT source_id, day FROM ek) d USING (source_id, day) WHERE o.type <> '' GROUP BY o.source_id, o.day
  UNION ALL
  SELECT 'e', o.source_id, o.day, o.type, o.event, NULL, (SELECT count(*)::int FROM observed_paths p WHERE (p.source_id, p.day, p.type, p.event) = (o.source_id, o.day, o.type, o.event))
    FROM observed_events o JOIN ek USING (source_id, day, type, event)
  UNION ALL
  SELECT 'p', p.source_id, p.day, p.type, p.event, p.path, 1 FROM observed_paths p JOIN pk USING (source_id, day, type, event, path)
  UNION ALL
  SELECT 'h', v.source_id, v.hour, NULL, NULL, NULL, count(*)::int
    FROM plan_violations v JOIN (SELECT DISTINCT source_id, hour FROM vk) h USING (source_id, hour) WHERE v.violation <> '' GROUP BY v.source_id, v.hour
  UNION ALL
  SELECT 'v', v.source_id, v.hour, v.type, v.event, v.violation, 1 FROM plan_violations v JOIN vk USING (source_id, hour, type, event, violation)`;

/**
 * The batch's upserts, in one statement, rows in key order (sorted by the
 * caller, kept by ORDER BY ord) so that writers lock them in one order;
 * counts added with `count = count + excluded.count`.
 */
const UPSERT = `
  WITH e AS (
    INSERT INTO observed_events (source_id, day, type, event, count, paths_truncated)
    SELECT source_id, day, type, event, count, truncated
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::boolean[]) WITH ORDINALITY AS r(source_id, day, type, event, count, truncated, ord)
    ORDER BY ord
    ON CONFLICT (source_id, day, type, event) DO UPDATE SET count = observed_events.count + excluded.count,
      paths_truncated = observed_events.paths_truncated OR excluded.paths_truncated
    RETURNING 1),
  p AS (
    INSERT INTO observed_paths (source_id, day, type, event, path, types, count)
    SELECT source_id, day, type, event, path, types, count
    FROM unnest($7::text[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::int[], $13::bigint[]) WITH ORDINALITY AS r(source_id, day, type, event, path, types, count, ord)
    ORDER BY ord
    ON CONFLICT (source_id, day, type, event, path) DO UPDATE SET types = observed_paths.types | excluded.types, count = observed_paths.count + excluded.count
    RETURNING 1),
  v AS (
    INSERT INTO plan_violations (source_id, hour, type, event, violation, count, example_message_id, example_received_at, example)
    SELECT source_id, hour, type, event, violation, count, message_id, received_at, example
    FROM unnest($14::text[], $15::bigint[], $16::text[], $17::text[], $18::text[], $19::bigint[], $20::text[], $21::bigint[], $22::text[])
      WITH ORDINALITY AS r(source_id, hour, type, event, violation, count, message_id, received_at, example, ord)
    ORDER BY ord
    ON CONFLICT (source_id, hour, type, event, violation) DO UPDATE SET count = plan_violations.count + excluded.count,
      example_message_id = CASE WHEN excluded.example_received_at >= plan_violations.example_received_at THEN excluded.example_message_id ELSE plan_violations.example_message_id END,
      example = CASE WHEN excluded.example_received_at >= plan_violations.example_received_at THEN excluded.example ELSE plan_violations.example END,
      example_received_at = greatest(plan_violations.example_received_at, excluded.example_received_at)
    RETURNING 1)
  SELECT (SELECT count(*) FROM e)::int + (SELECT count(*) FROM p)::int + (SELECT count(*) FROM v)::int AS written`;

/**
 * Adds a processing batch's observations in the caller's transaction (two
 * statements: what is held, then the upserts). Processing holds its advisory
 * lock, so no other node's batch changes what was read before the write.
 */
export async function recordObservations(client: pg.ClientBase, entries: readonly IngestEntry[], statuses: readonly MessageStatus[]): Promise<void> {
  const { schema, violations } = observeEntries(entries, statuses);
  if (schema.isEmpty && violations.isEmpty) return;
  const ek = schema.eventKeys();
  const pk = schema.pathKeys();
  const vk = violations.keys();
  const { rows } = await client.query<{ kind: string; source_id: string; at: string; type: string | null; event: string | null; name: string | null; n: number }>({
    name: 'switchyard_observed_held',
    text: HELD,
    values: [
      ek.map((k) => k.sourceId), ek.map((k) => k.day), ek.map((k) => k.type), ek.map((k) => k.event),
      pk.map((k) => k.sourceId), pk.map((k) => k.day), pk.map((k) => k.type), pk.map((k) => k.event), pk.map((k) => k.path),
      vk.map((k) => k.sourceId), vk.map((k) => k.hour), vk.map((k) => k.type), vk.map((k) => k.event), vk.map((k) => k.violation),
    ],
  });
  const eventsPerDay = new Map<string, number>();
  const knownEvents = new Set<string>();
  const pathsPerEvent = new Map<string, number>();
  const knownPaths = new Set<string>();
  const rowsPerHour = new Map<string, number>();
  const knownViolations = new Set<string>();
  for (const r of rows) {
    const at = Number(r.at);
    if (r.kind === 'd') eventsPerDay.set(`${r.source_id}\u0000${at}`, r.n);
    else if (r.kind === 'e') {
      const key = eventKey(r.source_id, at, r.type!, r.event!);
      knownEvents.add(key);
      pathsPerEvent.set(key, r.n);
    } else if (r.kind === 'p') knownPaths.add(pathKey(r.source_id, at, r.type!, r.event!, r.name!));
    else if (r.kind === 'h') rowsPerHour.set(`${r.source_id}\u0000${at}`, r.n);
    else knownViolations.add(violationRowKey({ sourceId: r.source_id, hour: at, type: r.type!, event: r.event!, violation: r.name! }));
  }
  const writes = capObserved(schema, { eventsPerDay, knownEvents, pathsPerEvent, knownPaths });
  const events = [
    ...writes.events,
    ...writes.unrecorded.map((u) => ({ sourceId: u.sourceId, day: u.day, type: UNRECORDED_TYPE, event: '', count: u.count, pathsTruncated: false })),
  ].sort((a, b) => (a.sourceId < b.sourceId ? -1 : a.sourceId > b.sourceId ? 1 : a.day - b.day || (a.type < b.type ? -1 : a.type > b.type ? 1 : a.event < b.event ? -1 : a.event > b.event ? 1 : 0)));
  const counted = violations.isEmpty ? [] : capViolations(violations, { rowsPerHour, known: knownViolations });
  const { paths } = writes;
  await client.query({
    name: 'switchyard_observed_upsert',
    text: UPSERT,
    values: [
      events.map((e) => e.sourceId), events.map((e) => e.day), events.map((e) => e.type), events.map((e) => e.event), events.map((e) => e.count), events.map((e) => e.pathsTruncated),
      paths.map((p) => p.sourceId), paths.map((p) => p.day), paths.map((p) => p.type), paths.map((p) => p.event), paths.map((p) => p.path), paths.map((p) => p.types), paths.map((p) => p.count),
      counted.map((v) => v.sourceId), counted.map((v) => v.hour), counted.map((v) => v.type), counted.map((v) => v.event), counted.map((v) => v.violation), counted.map((v) => v.count),
      counted.map((v) => v.example.messageId), counted.map((v) => v.example.receivedAt), counted.map((v) => v.example.violation),
    ],
  });
}

/**
 * `day = ANY($2)`: one index descent per day on the primary key (source,
 * day, type, event…). COLLATE "C": code point order, as SQLite's BINARY,
 * whatever the database's collation.
 */
export async function observedEvents(
  pool: pg.Pool,
  sourceId: string,
  days: readonly number[],
  after: ObservedPosition | undefined,
  limit: number,
): Promise<{ events: ObservedEventRow[]; unrecordedMessages: number }> {
  if (days.length === 0) return { events: [], unrecordedMessages: 0 };
  const [events, unrecorded] = await Promise.all([
    pool.query<{ type: string; event: string; count: string; pt: boolean }>(
      `SELECT type, event, sum(count) AS count, bool_or(paths_truncated) AS pt FROM observed_events
       WHERE source_id = $1 AND day = ANY($2::bigint[]) AND type <> '' GROUP BY type, event
       HAVING $3::bigint IS NULL OR sum(count) < $3 OR (sum(count) = $3 AND (type COLLATE "C" > $4::text OR (type = $4::text AND event COLLATE "C" > $5::text)))
       ORDER BY sum(count) DESC, type COLLATE "C", event COLLATE "C" LIMIT $6`,
      [sourceId, days, after?.count ?? null, after?.type ?? null, after?.event ?? null, limit],
    ),
    pool.query<{ n: string }>(`SELECT coalesce(sum(count), 0) AS n FROM observed_events WHERE source_id = $1 AND day = ANY($2::bigint[]) AND type = ''`, [sourceId, days]),
  ]);
  return {
    events: events.rows.map((e) => ({ type: e.type, event: e.event, count: Number(e.count), pathsTruncated: e.pt })),
    unrecordedMessages: Number(unrecorded.rows[0]?.n ?? 0),
  };
}

/** Each event's first `perEvent` paths, one bounded lateral read per event, in one statement. */
export async function observedPaths(
  pool: pg.Pool,
  sourceId: string,
  days: readonly number[],
  events: ReadonlyArray<{ type: string; event: string }>,
  perEvent: number,
): Promise<ObservedPathRow[]> {
  if (days.length === 0 || events.length === 0) return [];
  const { rows } = await pool.query<{ type: string; event: string; path: string; types: number; count: string }>(
    `SELECT k.type, k.event, p.path, p.types, p.count
     FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS k(type, event, ord)
     CROSS JOIN LATERAL (
       SELECT path, bit_or(types) AS types, sum(count) AS count FROM observed_paths
       WHERE source_id = $1 AND day = ANY($2::bigint[]) AND type = k.type AND event = k.event
       GROUP BY path ORDER BY path COLLATE "C" LIMIT $5) p
     ORDER BY k.ord, p.path COLLATE "C"`,
    [sourceId, days, events.map((e) => e.type), events.map((e) => e.event), perEvent],
  );
  return rows.map((p) => ({ type: p.type, event: p.event, path: p.path, types: p.types, count: Number(p.count) }));
}

export async function violationCounts(pool: pg.Pool, sourceId: string, sinceHour: number): Promise<ViolationRows> {
  const { rows } = await pool.query<{ type: string; event: string; violation: string; count: string; latest: [string, string, string] }>(
    `SELECT type, event, violation, sum(count) AS count,
       (array_agg(ARRAY[example_message_id, example_received_at::text, example] ORDER BY example_received_at DESC))[1:1] AS latest
     FROM plan_violations WHERE source_id = $1 AND hour >= $2 GROUP BY type, event, violation`,
    [sourceId, sinceHour],
  );
  return rows.map((r) => {
    const [messageId, receivedAt, violation] = (r.latest as unknown as string[][])[0]!;
    return { type: r.type, event: r.event, violation: r.violation, count: Number(r.count), example: { messageId: messageId!, receivedAt: Number(receivedAt), violation: violation! } };
  });
}

/** One batch per table, each its own statement; resolves how many rows went (0: nothing left). */
export async function pruneObservationsBatch(pool: pg.Pool, schemaBefore: number, violationsBefore: number): Promise<number> {
  let removed = 0;
  for (const [table, column, before] of [
    ['observed_paths', 'day', schemaBefore],
    ['observed_events', 'day', schemaBefore],
    ['plan_violations', 'hour', violationsBefore],
  ] as const) {
    const result = await pool.query(`DELETE FROM ${table} WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${table} WHERE ${column} < $1 LIMIT 5000))`, [before]);
    removed += result.rowCount ?? 0;
  }
  return removed;
}
