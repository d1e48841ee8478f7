import {
  REGULATION_STATUSES,
  type RegulationStatus,
  type RegulationStepStatus,
  type RegulationType,
  SUBJECT_TYPE,
  initialStatus,
  liftProblem,
  MAX_SUPPRESSION_PAIRS,
  parseRegulationRequest,
  regulationEffects,
} from '../domain/regulation.js';
import { ApiError } from '../errors.js';
import type { RegulationRunner } from '../regulations/regulation-runner.js';
import type { SuppressionList } from '../regulations/suppression-list.js';
import type { RegulationDetail, RegulationRecord, Store } from '../store/store.js';
import { newRegulationId } from '../util/ids.js';
import { limitParam } from './validate.js';

/** A regulation as the admin API shows it; times are ISO-8601. */
export interface RegulationView {
  readonly id: string;
  readonly regulationType: RegulationType;
  readonly subjectType: typeof SUBJECT_TYPE;
  /** Only when reading one regulation; lists leave the (up to 5,000) ids out. */
  readonly subjectIds?: readonly string[];
  readonly subjectCount: number;
  /** null: every source. */
  readonly sourceIds: readonly string[] | null;
  readonly status: RegulationStatus;
  readonly createdAt: string;
  readonly updatedAt: string;
  /**
   * Its status per source, by source id: in a list the first
   * {@link LIST_SOURCES}, reading one the first page (see `sourcesAfter`);
   * `sourceCounts.total` tells when there are more.
   */
  readonly sources: ReadonlyArray<{ readonly sourceId: string; readonly status: RegulationStepStatus; readonly error?: string }>;
  readonly sourceCounts: { readonly total: number; readonly pending: number; readonly finished: number; readonly failed: number };
  /** Reading one, when more sources follow this page: pass it as `sourcesAfter`. */
  readonly nextSourcesAfter?: string;
}

export interface RegulationAdminOptions {
  readonly now: () => number;
  /** Present in a serving process: reloaded before a suppression is answered, so it holds from the answer on. */
  readonly suppressions?: SuppressionList | undefined;
  /** Present in a serving process: woken so a deletion starts at once. */
  readonly runner?: Pick<RegulationRunner, 'wake'> | undefined;
}

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 500;
/**
 * Sources shown per request in a list: a request has a row per affected
 * source, and 151 requests over 997 sources made a 9 MB list that held the
 * event loop for 2.9 s. `sourceCounts` counts them all; reading one request pages them.
 */
export const LIST_SOURCES = 20;
/** Sources per page reading one request (`sourcesLimit`). */
const SOURCES_PAGE = 1_000;
/** How many unknown source ids an error names. */
const NAMED_UNKNOWN = 5;

/** Deletion and suppression requests: creating and reading them. */
export class RegulationAdmin {
  constructor(
    private readonly store: Store,
    private readonly options: RegulationAdminOptions,
  ) {}

  /** `{regulationType, subjectType: "USER_ID", subjectIds, sourceIds?}` → `{id, status}`. */
  async create(input: unknown): Promise<{ id: string; status: RegulationStatus }> {
    const parsed = parseRegulationRequest(input);
    if (!parsed.ok) throw new ApiError('invalid_request', parsed.problem);
    const { regulationType, subjectIds, sourceIds } = parsed.request;

    const existing = (await this.store.listSources()).map((s) => s.id);
    if (sourceIds !== undefined) {
      const known = new Set(existing);
      const unknown = sourceIds.filter((id) => !known.has(id));
      if (unknown.length > 0) {
        const named = unknown.slice(0, NAMED_UNKNOWN).map((id) => JSON.stringify(id.slice(0, 60)));
        const more = unknown.length > NAMED_UNKNOWN ? ` and ${unknown.length - NAMED_UNKNOWN} more` : '';
        throw new ApiError('invalid_request', `sourceIds: no source with id ${named.join(', ')}${more}`);
      }
    }

    const effects = regulationEffects(regulationType);
    if (effects.suppression === 'remove' && sourceIds === undefined) {
      // Lifting every suppression of the subjects costs the rows they have (see liftProblem).
      const inForce = await this.store.countSuppressionsInForce(subjectIds, MAX_SUPPRESSION_PAIRS + 1);
      const problem = liftProblem(subjectIds.length, inForce);
      if (problem !== undefined) throw new ApiError('invalid_request', problem);
    }

    const id = newRegulationId();
    const stepSourceIds = sourceIds ?? existing;
    await this.store.createRegulation({ id, regulationType, subjectIds, sourceIds, stepSourceIds, createdAt: this.options.now() });
    if (effects.suppression !== undefined) await this.options.suppressions?.reload();
    if (effects.deletes) this.options.runner?.wake();
    return { id, status: initialStatus(regulationType, stepSourceIds.length) };
  }

  /** Newest first; `status` one of INITIALIZED, RUNNING, FINISHED, FAILED; `limit` from 1 to 500 (default 50). */
  async list(query: { status?: unknown; limit?: unknown }): Promise<{ regulations: RegulationView[] }> {
    const status = query.status === undefined || query.status === '' ? undefined : query.status;
    if (status !== undefined && !(REGULATION_STATUSES as readonly unknown[]).includes(status)) {
      throw new ApiError('invalid_request', `status must be one of ${REGULATION_STATUSES.join(', ')}`);
    }
    const records = await this.store.listRegulations({
      status: status as RegulationStatus | undefined,
      limit: limitParam(query.limit, DEFAULT_LIMIT, MAX_LIMIT),
      sources: LIST_SOURCES,
    });
    return { regulations: records.map((record) => viewRegulation(record)) };
  }

  /** `sourcesAfter`: the sources after this id (a `nextSourcesAfter`); `sourcesLimit` from 1 to 1,000 (default 1,000). */
  async get(id: string, query: { sourcesAfter?: unknown; sourcesLimit?: unknown } = {}): Promise<RegulationView> {
    const limit = limitParam(query.sourcesLimit, SOURCES_PAGE, SOURCES_PAGE, 'sourcesLimit');
    const after = query.sourcesAfter === undefined || query.sourcesAfter === '' ? undefined : query.sourcesAfter;
    if (after !== undefined && typeof after !== 'string') throw new ApiError('invalid_request', 'sourcesAfter must be a source id');
    const detail = await this.store.getRegulation(id, { after, limit });
    if (detail === undefined) throw new ApiError('not_found', `no regulation with id ${JSON.stringify(id.slice(0, 60))}`);
    return viewRegulation(detail, limit);
  }
}

/** `pageLimit`: the page size `record.sources` was read with, when reading one (then `nextSourcesAfter` when it is full). */
export function viewRegulation(record: RegulationRecord | RegulationDetail, pageLimit?: number): RegulationView {
  const { total, pending, failed } = record.sourceCounts;
  const last = record.sources[record.sources.length - 1];
  return {
    id: record.id,
    regulationType: record.regulationType,
    subjectType: SUBJECT_TYPE,
    ...('subjectIds' in record && { subjectIds: record.subjectIds }),
    subjectCount: record.subjectCount,
    sourceIds: record.sourceIds ?? null,
    status: record.status,
    createdAt: new Date(record.createdAt).toISOString(),
    updatedAt: new Date(record.updatedAt).toISOString(),
    sources: record.sources.map((s) => ({ sourceId: s.sourceId, status: s.status, ...(s.error !== undefined && { error: s.error }) })),
    sourceCounts: { total, pending, finished: total - pending - failed, failed },
    ...(pageLimit !== undefined && last !== undefined && record.sources.length === pageLimit && { nextSourcesAfter: last.sourceId }),
  };
}
