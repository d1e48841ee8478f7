import type { Database, Statement, Transaction } from 'better-sqlite3';
import {
  type RegulationStatus,
  type RegulationStepStatus,
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
import type { MessageQueries } from './message-queries.js';
import { HIGHEST_RAW_SEQ } from './raw-queries.js';
import { type RegulationSourceRow, toRegulationSourceRecord } from '../rows.js';

interface RegulationRow {
  id: string;
  regulation_type: RegulationType;
  subject_count: number;
  source_ids: string | null;
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
  lifted: 0 | 1;
}

/** How the suppressions table writes "every source" (no source id is '*'). */
const EVERY_SOURCE = '*';

/** Every column but the subject ids, which lists leave out. */
const LIST_COLUMNS = 'id, regulation_type, subject_count, source_ids, status, created_at, updated_at, source_count, pending_count, failed_count';

/** The seq a suppression row takes when it changes (see the migration that added it). */
const NEXT_SUPPRESSION_SEQ = '(SELECT coalesce(max(seq), 0) + 1 FROM suppressions)';

/** A source's messages of the given users (a JSON array), but never the `delete` messages sent for them. */
const USERS_MESSAGES = `
  SELECT seq FROM messages
  WHERE source_id = ? AND user_id IN (SELECT value FROM json_each(?)) AND type IS NOT 'delete'`;

/** The `regulations`, `regulation_sources` and `suppressions` tables. */
export class RegulationQueries {
  private readonly insertRegulation: Statement<unknown[]>;
  private readonly insertSource: Statement<[string, string, RegulationStepStatus, number]>;
  private readonly suppress: Statement<[string, string, string, number]>;
  private readonly suppressedSources: Statement<[string], { source_id: string }>;
  private readonly lift: Statement<[string, number, string, string]>;
  private readonly suppressionChanges: Statement<[number, number], SuppressionRow>;
  private readonly claim: Statement<[number, string, string]>;
  private readonly fail: Statement<[string, number, string, string]>;
  private readonly eraseAttempts: Statement<[string, string]>;
  private readonly eraseDeliveries: Statement<[string, string]>;
  private readonly eraseMessages: Statement<[string, string]>;
  private readonly stepCounts: Statement<[string], { pending: number; failed: number }>;
  private readonly setStatus: Statement<[RegulationStatus, number, number, number, string]>;
  private readonly sourcesOf: Statement<[string, string, number], RegulationSourceRow>;
  private readonly runStepTx: Transaction<(step: RegulationStepRun) => boolean>;
  private readonly failStepTx: Transaction<(step: RegulationStepKey, error: string, at: number) => boolean>;

  constructor(
    private readonly db: Database,
    private readonly messages: MessageQueries,
  ) {
    this.insertRegulation = db.prepare(`
      INSERT INTO regulations (id, regulation_type, subject_ids, subject_count, source_ids, status, created_at, updated_at, source_count, pending_count, raw_seq_mark)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${HIGHEST_RAW_SEQ})`);
    this.insertSource = db.prepare(`
      INSERT INTO regulation_sources (regulation_id, source_id, status, updated_at) VALUES (?, ?, ?, ?)`);
    this.suppress = db.prepare(`
      INSERT INTO suppressions (user_id, source_id, regulation_id, created_at, seq, lifted) VALUES (?, ?, ?, ?, ${NEXT_SUPPRESSION_SEQ}, 0)
      ON CONFLICT (user_id, source_id) DO UPDATE SET
        regulation_id = excluded.regulation_id, created_at = excluded.created_at, seq = excluded.seq, lifted = 0`);
    // One row a statement: each takes its own seq.
    this.suppressedSources = db.prepare(`SELECT source_id FROM suppressions WHERE user_id = ? AND lifted = 0`);
    this.lift = db.prepare(`
      UPDATE suppressions SET lifted = 1, regulation_id = ?, created_at = ?, seq = ${NEXT_SUPPRESSION_SEQ}
      WHERE user_id = ? AND source_id = ? AND lifted = 0`);
    this.suppressionChanges = db.prepare(`SELECT * FROM suppressions WHERE seq > ? ORDER BY seq LIMIT ?`);
    this.claim = db.prepare(`
      UPDATE regulation_sources SET status = 'FINISHED', updated_at = ?
      WHERE regulation_id = ? AND source_id = ? AND status = 'PENDING'`);
    this.fail = db.prepare(`
      UPDATE regulation_sources SET status = 'FAILED', error = ?, updated_at = ?
      WHERE regulation_id = ? AND source_id = ? AND status = 'PENDING'`);
    this.eraseAttempts = db.prepare(`
      DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE message_seq IN (${USERS_MESSAGES}))`);
    this.eraseDeliveries = db.prepare(`DELETE FROM deliveries WHERE message_seq IN (${USERS_MESSAGES})`);
    this.eraseMessages = db.prepare(`DELETE FROM messages WHERE seq IN (${USERS_MESSAGES})`);
    this.stepCounts = db.prepare(`
      SELECT coalesce(sum(status = 'PENDING'), 0) AS pending, coalesce(sum(status = 'FAILED'), 0) AS failed
      FROM regulation_sources WHERE regulation_id = ?`);
    this.setStatus = db.prepare(`UPDATE regulations SET status = ?, updated_at = ?, pending_count = ?, failed_count = ? WHERE id = ?`);
    // By the primary key: a page costs its rows, whatever the request's number of sources.
    this.sourcesOf = db.prepare(`SELECT * FROM regulation_sources WHERE regulation_id = ? AND source_id > ? ORDER BY source_id LIMIT ?`);
    this.runStepTx = db.transaction((step: RegulationStepRun) => this.runStepNow(step));
    this.failStepTx = db.transaction((step: RegulationStepKey, error: string, at: number) => {
      if (this.fail.run(error, at, step.regulationId, step.sourceId).changes === 0) return false;
      this.updateStatus(step.regulationId, at);
      return true;
    });
  }

  /** Stores a request and applies its suppression effect; call it inside a transaction. */
  create(regulation: NewRegulation): void {
    const effects = regulationEffects(regulation.regulationType);
    const at = regulation.createdAt;
    this.insertRegulation.run(
      regulation.id,
      regulation.regulationType,
      JSON.stringify(regulation.subjectIds),
      regulation.subjectIds.length,
      regulation.sourceIds === undefined ? null : JSON.stringify(regulation.sourceIds),
      initialStatus(regulation.regulationType, regulation.stepSourceIds.length),
      at,
      at,
      regulation.stepSourceIds.length,
      effects.deletes ? regulation.stepSourceIds.length : 0,
    );
    for (const sourceId of regulation.stepSourceIds) {
      this.insertSource.run(regulation.id, sourceId, effects.deletes ? 'PENDING' : 'FINISHED', at);
    }
    const scopes = regulation.sourceIds ?? [EVERY_SOURCE];
    for (const userId of regulation.subjectIds) {
      if (effects.suppression === 'add') {
        for (const scope of scopes) this.suppress.run(userId, scope, regulation.id, at);
      } else if (effects.suppression === 'remove') {
        const lifted = regulation.sourceIds ?? this.suppressedSources.all(userId).map((row) => row.source_id);
        for (const sourceId of lifted) this.lift.run(regulation.id, at, userId, sourceId);
      }
    }
  }

  /** One step in one transaction; see Store.runRegulationStep. */
  runStep(step: RegulationStepRun): boolean {
    return this.runStepTx.immediate(step);
  }

  failStep(step: RegulationStepKey, error: string, at: number): boolean {
    return this.failStepTx.immediate(step, error, at);
  }

  private runStepNow(step: RegulationStepRun): boolean {
    // The claim comes first: nothing else is written unless this call owns the step.
    if (this.claim.run(step.at, step.regulationId, step.sourceId).changes === 0) return false;
    // An Engage stream commit of a page read before this finds the count moved and is refused (see Store.getEngageStreamPosition).
    this.db.prepare(`UPDATE engage_state SET erasures = erasures + 1 WHERE id = 1`).run();
    const users = JSON.stringify(step.eraseUserIds);
    this.eraseAttempts.run(step.sourceId, users);
    this.eraseDeliveries.run(step.sourceId, users);
    this.eraseMessages.run(step.sourceId, users);
    // Their Engage profiles go in the same commit as the delete messages: an
    // evaluator's commit of a profile it read before fails its version check,
    // so no sync of an erased user is created after its delete.
    const profiles = `SELECT profile_id FROM profile_identifiers WHERE identifier IN (SELECT 'user_id:' || value FROM json_each(?))`;
    this.db.prepare(`DELETE FROM profile_outputs WHERE profile_id IN (${profiles})`).run(users);
    this.db.prepare(`DELETE FROM profiles WHERE id IN (${profiles})`).run(users);
    this.db.prepare(`DELETE FROM profile_identifiers WHERE profile_id IN (${profiles})`).run(users);
    for (const message of step.messages) this.messages.insert(message, message.status);
    this.updateStatus(step.regulationId, step.at);
    return true;
  }

  private updateStatus(regulationId: string, at: number): void {
    const { pending, failed } = this.stepCounts.get(regulationId)!;
    const status: RegulationStatus = pending > 0 ? 'RUNNING' : failed > 0 ? 'FAILED' : 'FINISHED';
    this.setStatus.run(status, at, pending, failed, regulationId);
  }

  list(filter: RegulationFilter): RegulationRecord[] {
    const rows = (
      filter.status === undefined
        ? this.db.prepare(`SELECT ${LIST_COLUMNS} FROM regulations ORDER BY created_at DESC, id DESC LIMIT ?`).all(filter.limit)
        : this.db
            .prepare(`SELECT ${LIST_COLUMNS} FROM regulations WHERE status = ? ORDER BY created_at DESC, id DESC LIMIT ?`)
            .all(filter.status, filter.limit)
    ) as RegulationRow[];
    return rows.map((row) => toRecord(row, this.sourcePage(row.id, { limit: filter.sources })));
  }

  get(id: string, sources?: RegulationSourcePage): RegulationDetail | undefined {
    const row = this.db.prepare(`SELECT * FROM regulations WHERE id = ?`).get(id) as (RegulationRow & { subject_ids: string; raw_seq_mark: number }) | undefined;
    if (row === undefined) return undefined;
    return {
      ...toRecord(row, this.sourcePage(id, sources ?? { limit: -1 })),
      subjectIds: JSON.parse(row.subject_ids) as string[],
      rawSeqMark: row.raw_seq_mark,
    };
  }

  /** A limit of -1: every row. */
  private sourcePage(id: string, page: RegulationSourcePage): RegulationSourceRecord[] {
    if (page.limit === 0) return [];
    return this.sourcesOf.all(id, page.after ?? '', page.limit).map(toRegulationSourceRecord);
  }

  listPendingSteps(limit: number): RegulationStepKey[] {
    const rows = this.db
      .prepare(`
        SELECT s.regulation_id, s.source_id FROM regulation_sources s JOIN regulations r ON r.id = s.regulation_id
        WHERE s.status = 'PENDING' ORDER BY r.created_at, r.id, s.source_id LIMIT ?`)
      .all(limit) as Array<Pick<RegulationSourceRow, 'regulation_id' | 'source_id'>>;
    return rows.map((row) => ({ regulationId: row.regulation_id, sourceId: row.source_id }));
  }

  listSuppressions(): SuppressionRecord[] {
    return (this.db.prepare(`SELECT * FROM suppressions WHERE lifted = 0`).all() as SuppressionRow[]).map((row) => {
      const { seq: _seq, lifted: _lifted, ...record } = toSuppressionChange(row);
      return record;
    });
  }

  countInForce(userIds: readonly string[], atMost: number): number {
    // The LIMIT inside: the count stops at atMost rows, found by the primary key's user_id prefix.
    const row = this.db
      .prepare(`SELECT count(*) AS n FROM (SELECT 1 FROM suppressions WHERE user_id IN (SELECT value FROM json_each(?)) AND lifted = 0 LIMIT ?)`)
      .get(JSON.stringify(userIds), atMost) as { n: number };
    return row.n;
  }

  listSuppressionChanges(afterSeq: number, limit: number): SuppressionChange[] {
    return this.suppressionChanges.all(afterSeq, limit).map(toSuppressionChange);
  }
}

function toSuppressionChange(row: SuppressionRow): SuppressionChange {
  return {
    userId: row.user_id,
    sourceId: row.source_id === EVERY_SOURCE ? undefined : row.source_id,
    regulationId: row.regulation_id,
    createdAt: row.created_at,
    seq: row.seq,
    lifted: row.lifted === 1,
  };
}

function toRecord(row: RegulationRow, sources: RegulationSourceRecord[]): RegulationRecord {
  return {
    id: row.id,
    regulationType: row.regulation_type,
    subjectCount: row.subject_count,
    sourceIds: row.source_ids === null ? undefined : (JSON.parse(row.source_ids) as string[]),
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    sources,
    sourceCounts: { total: row.source_count, pending: row.pending_count, failed: row.failed_count },
  };
}
