// Deletion and suppression requests: the `regulations`, `regulation_sources` and `suppressions` tables.
import type pg from 'pg';
import {
  type RegulationStatus,
  type RegulationType,
  initialStatus,
  regulationEffects,
} from '../../domain/regulation.js';
import type {
  NewRegulation,
  RegulationDetail,
  RegulationFilter,
  RegulationRecord,
  RegulationSourcePage,
  RegulationSourceRecord,
  RegulationStepKey,
  RegulationStepRun,
  SuppressionChange,
  SuppressionRecord,
} from '../store.js';
import { textColumn } from './connection.js';
import { insertMessages } from './message-queries.js';
import { HIGHEST_RAW_SEQ } from './raw-queries.js';
import { type RegulationSourceRow, toRegulationSourceRecord } from '../rows.js';

interface RegulationRow {
  id: string;
  regulation_type: RegulationType;
  subject_count: number;
  source_ids: string[] | null;
  status: RegulationStatus;
  created_at: number;
  updated_at: number;
  source_count: number;
  pending_count: number;
  failed_count: number;
}

interface SuppressionRow {
  user_id: string;
  source_id: string;
  regulation_id: string;
  created_at: number;
  seq: number;
  lifted: boolean;
}

/** How the suppressions table writes "every source" (no source id is '*'), as in SQLite. */
const EVERY_SOURCE = '*';

/** Every column but the subject ids, which lists leave out. */
const LIST_COLUMNS = 'id, regulation_type, subject_count, source_ids, status, created_at, updated_at, source_count, pending_count, failed_count';

/** User ids as messages.user_id stores them (see textColumn), so that they match. */
const userColumn = (ids: readonly string[]): string[] => ids.map((id) => textColumn(id)!);

/**
 * Stores a request and applies its suppression effect, in the caller's
 * transaction; a request with the same id makes the first INSERT fail. The
 * caller bumps the config version when the type suppresses: that also
 * serializes the suppression writes of concurrent requests.
 */
export async function createRegulation(client: pg.ClientBase, regulation: NewRegulation): Promise<void> {
  const effects = regulationEffects(regulation.regulationType);
  const at = regulation.createdAt;
  const subjects = userColumn(regulation.subjectIds);
  // The mark is read by this statement, whose snapshot (READ COMMITTED)
  // includes every raw request committed before it started, hence every one
  // acknowledged before this request came in. Rows it misses are either
  // processed (their messages are committed, and the steps erase them) or not
  // yet committed, so not acknowledged yet.
  await client.query(
    `INSERT INTO regulations (id, regulation_type, subject_ids, subject_count, source_ids, status, created_at, updated_at, source_count, pending_count, raw_seq_mark)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, (${HIGHEST_RAW_SEQ}))`,
    [
      regulation.id,
      regulation.regulationType,
      subjects,
      subjects.length,
      regulation.sourceIds ?? null,
      initialStatus(regulation.regulationType, regulation.stepSourceIds.length),
      at,
      regulation.stepSourceIds.length,
      effects.deletes ? regulation.stepSourceIds.length : 0,
    ],
  );
  if (regulation.stepSourceIds.length > 0) {
    await client.query(
      `INSERT INTO regulation_sources (regulation_id, source_id, status, updated_at)
       SELECT $1::text, source_id, $3::text, $4::bigint FROM unnest($2::text[]) AS s(source_id)`,
      [regulation.id, regulation.stepSourceIds, effects.deletes ? 'PENDING' : 'FINISHED', at],
    );
  }
  if (effects.suppression === 'add') {
    // DISTINCT: an upsert may not touch one row twice, and two ids can map to
    // one stored id (U+0000 and U+FFFD). excluded.seq is the sequence's next
    // value, taken for the row proposed.
    await client.query(
      `INSERT INTO suppressions (user_id, source_id, regulation_id, created_at)
       SELECT DISTINCT u.user_id, s.source_id, $3::text, $4::bigint FROM unnest($1::text[]) AS u(user_id), unnest($2::text[]) AS s(source_id)
       ON CONFLICT (user_id, source_id) DO UPDATE SET
         regulation_id = excluded.regulation_id, created_at = excluded.created_at, seq = excluded.seq, lifted = false`,
      [subjects, regulation.sourceIds ?? [EVERY_SOURCE], regulation.id, at],
    );
  } else if (effects.suppression === 'remove') {
    // Naming sources lifts only their rows, never an "every source" one. The
    // rows stay, lifted, with a new seq: other nodes read the lift from them.
    await client.query(
      `UPDATE suppressions SET lifted = true, regulation_id = $3, created_at = $4, seq = nextval('suppressions_seq')
       WHERE user_id = ANY($1::text[]) AND ($2::text[] IS NULL OR source_id = ANY($2::text[])) AND NOT lifted`,
      [subjects, regulation.sourceIds ?? null, regulation.id, at],
    );
  }
}

/**
 * One step in the caller's transaction; see Store.runRegulationStep. Resolves
 * undefined when the step was not PENDING (nothing written), else whether
 * delivery jobs were created. A fixed number of statements, whatever the
 * number of users or messages.
 */
export async function runRegulationStep(client: pg.ClientBase, step: RegulationStepRun): Promise<{ deliveriesAdded: boolean } | undefined> {
  // The claim is the first write: a concurrent call for the same step waits
  // here on the row lock, then finds the row FINISHED and matches nothing.
  const claimed = await client.query(
    `UPDATE regulation_sources SET status = 'FINISHED', updated_at = $1
     WHERE regulation_id = $2 AND source_id = $3 AND status = 'PENDING'`,
    [step.at, step.regulationId, step.sourceId],
  );
  if (claimed.rowCount === 0) return undefined;
  // Before erasing anything: an Engage stream commit in progress holds this
  // row until it commits, and the erasure below then sees (and erases) what
  // it wrote; one that comes after finds the count moved and is refused
  // (see Store.getEngageStreamPosition).
  await client.query(`UPDATE engage_state SET erasures = erasures + 1 WHERE id = 1`);
  // The delivery rows are locked in id order, as finishDeliveries updates
  // them, so that a worker recording outcomes and this step wait for each
  // other instead of deadlocking.
  await client.query(
    `WITH erased AS (
       DELETE FROM messages WHERE source_id = $1 AND user_id = ANY($2::text[]) AND type IS DISTINCT FROM 'delete'
       RETURNING seq),
     locked AS (
       SELECT id FROM deliveries WHERE message_seq IN (SELECT seq FROM erased) ORDER BY id FOR UPDATE),
     jobs AS (
       DELETE FROM deliveries WHERE id IN (SELECT id FROM locked) RETURNING id)
     DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM jobs)`,
    [step.sourceId, userColumn(step.eraseUserIds)],
  );
  // Their Engage profiles go in the same commit as the delete messages: an
  // evaluator's commit of a profile it read before fails its version check,
  // so no sync of an erased user is created after its delete.
  await client.query(
    `WITH p AS (SELECT profile_id FROM profile_identifiers WHERE identifier = ANY($1::text[])),
     outputs AS (DELETE FROM profile_outputs WHERE profile_id IN (SELECT profile_id FROM p)),
     identifiers AS (DELETE FROM profile_identifiers WHERE profile_id IN (SELECT profile_id FROM p))
     DELETE FROM profiles WHERE id IN (SELECT profile_id FROM p)`,
    [userColumn(step.eraseUserIds).map((u) => `user_id:${u}`)],
  );
  const { deliveriesAdded } = await insertMessages(client, step.messages, step.messages.map((m) => m.status));
  await updateStatus(client, step.regulationId, step.at);
  return { deliveriesAdded };
}

/** Marks a PENDING step FAILED, in the caller's transaction; false, writing nothing, when it is not PENDING. */
export async function failRegulationStep(client: pg.ClientBase, step: RegulationStepKey, error: string, at: number): Promise<boolean> {
  const failed = await client.query(
    `UPDATE regulation_sources SET status = 'FAILED', error = $1, updated_at = $2
     WHERE regulation_id = $3 AND source_id = $4 AND status = 'PENDING'`,
    [textColumn(error), at, step.regulationId, step.sourceId],
  );
  if (failed.rowCount === 0) return false;
  await updateStatus(client, step.regulationId, at);
  return true;
}

/**
 * Sets the request's status from its source rows. Steps of one request may
 * end at once on several nodes, each unable to see the others' uncommitted
 * rows; so each first locks the request's row, and counts in a later
 * statement, whose snapshot (READ COMMITTED) then includes every step that
 * committed before it got the lock. The last to commit counts them all.
 */
async function updateStatus(client: pg.ClientBase, regulationId: string, at: number): Promise<void> {
  await client.query(`SELECT 1 FROM regulations WHERE id = $1 FOR UPDATE`, [regulationId]);
  await client.query(
    `UPDATE regulations SET updated_at = $2, pending_count = c.pending, failed_count = c.failed,
       status = CASE WHEN c.pending > 0 THEN 'RUNNING' WHEN c.failed > 0 THEN 'FAILED' ELSE 'FINISHED' END
     FROM (SELECT count(*) FILTER (WHERE status = 'PENDING') AS pending, count(*) FILTER (WHERE status = 'FAILED') AS failed
           FROM regulation_sources WHERE regulation_id = $1) c
     WHERE id = $1`,
    [regulationId, at],
  );
}

export async function listRegulations(pool: pg.Pool, filter: RegulationFilter): Promise<RegulationRecord[]> {
  const { rows } = await pool.query<RegulationRow>(
    `SELECT ${LIST_COLUMNS} FROM regulations WHERE ($1::text IS NULL OR status = $1) ORDER BY created_at DESC, id DESC LIMIT $2`,
    [filter.status ?? null, filter.limit],
  );
  if (rows.length === 0 || filter.sources === 0) return rows.map((row) => toRecord(row, []));
  // The first rows of each request by its primary key: the others are not read.
  const sources = await pool.query<RegulationSourceRow>(
    `SELECT s.* FROM unnest($1::text[]) AS r(id),
       LATERAL (SELECT * FROM regulation_sources WHERE regulation_id = r.id ORDER BY source_id LIMIT $2) s`,
    [rows.map((row) => row.id), filter.sources],
  );
  const byRegulation = new Map<string, RegulationSourceRecord[]>();
  for (const row of sources.rows) {
    let list = byRegulation.get(row.regulation_id);
    if (list === undefined) byRegulation.set(row.regulation_id, (list = []));
    list.push(toRegulationSourceRecord(row));
  }
  return rows.map((row) => toRecord(row, byRegulation.get(row.id) ?? []));
}

export async function getRegulation(pool: pg.Pool, id: string, page?: RegulationSourcePage): Promise<RegulationDetail | undefined> {
  const { rows } = await pool.query<RegulationRow & { subject_ids: string[]; raw_seq_mark: string }>(`SELECT * FROM regulations WHERE id = $1`, [id]);
  const row = rows[0];
  if (row === undefined) return undefined;
  const sources = await pool.query<RegulationSourceRow>(
    `SELECT * FROM regulation_sources WHERE regulation_id = $1 AND ($2::text IS NULL OR source_id > $2) ORDER BY source_id LIMIT $3`,
    [id, page?.after ?? null, page?.limit ?? null],
  );
  return { ...toRecord(row, sources.rows.map(toRegulationSourceRecord)), subjectIds: row.subject_ids, rawSeqMark: Number(row.raw_seq_mark) };
}

export async function listPendingRegulationSteps(pool: pg.Pool, limit: number): Promise<RegulationStepKey[]> {
  const { rows } = await pool.query<Pick<RegulationSourceRow, 'regulation_id' | 'source_id'>>(
    `SELECT s.regulation_id, s.source_id FROM regulation_sources s JOIN regulations r ON r.id = s.regulation_id
     WHERE s.status = 'PENDING' ORDER BY r.created_at, r.id, s.source_id LIMIT $1`,
    [limit],
  );
  return rows.map((row) => ({ regulationId: row.regulation_id, sourceId: row.source_id }));
}

export async function listSuppressions(pool: pg.Pool): Promise<SuppressionRecord[]> {
  const { rows } = await pool.query<SuppressionRow>(`SELECT * FROM suppressions WHERE NOT lifted`);
  return rows.map((row) => {
    const { seq: _seq, lifted: _lifted, ...record } = toSuppressionChange(row);
    return record;
  });
}

/** See Store.countSuppressionsInForce: the LIMIT inside stops the count at `atMost` rows. */
export async function countSuppressionsInForce(pool: pg.Pool, userIds: readonly string[], atMost: number): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM suppressions WHERE user_id = ANY($1::text[]) AND NOT lifted LIMIT $2) s`,
    [userColumn(userIds), atMost],
  );
  return rows[0]!.n;
}

export async function listSuppressionChanges(pool: pg.Pool, afterSeq: number, limit: number): Promise<SuppressionChange[]> {
  const { rows } = await pool.query<SuppressionRow>(`SELECT * FROM suppressions WHERE seq > $1 ORDER BY seq LIMIT $2`, [afterSeq, limit]);
  return rows.map(toSuppressionChange);
}

function toSuppressionChange(row: SuppressionRow): SuppressionChange {
  return {
    userId: row.user_id,
    sourceId: row.source_id === EVERY_SOURCE ? undefined : row.source_id,
    regulationId: row.regulation_id,
    createdAt: row.created_at,
    seq: row.seq,
    lifted: row.lifted,
  };
}

function toRecord(row: RegulationRow, sources: RegulationSourceRecord[]): RegulationRecord {
  return {
    id: row.id,
    regulationType: row.regulation_type,
    subjectCount: row.subject_count,
    sourceIds: row.source_ids ?? undefined,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    sources,
    sourceCounts: { total: row.source_count, pending: row.pending_count, failed: row.failed_count },
  };
}
