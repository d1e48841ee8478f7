import { isJsonObject } from './message.js';
import { MAX_ID_BYTES, idWithinBounds, storedId } from './normalize.js';

/**
 * Deletion and suppression requests ("regulations"), as Segment's Public API
 * names them.
 *
 * Glossary
 * - subject: a user, named by `userId` (the only subject type).
 * - affected sources: the sources a request names, or every source.
 * - step: the work of a deleting request on one affected source: erase the
 *   subjects' stored messages and send each subject's `delete` message.
 * - suppression: while it lasts, ingest stores a subject's messages as
 *   `suppressed` and routes none of them.
 */

export const REGULATION_TYPES = ['DELETE_ONLY', 'SUPPRESS_WITH_DELETE', 'SUPPRESS_ONLY', 'UNSUPPRESS'] as const;
export type RegulationType = (typeof REGULATION_TYPES)[number];

/**
 * - INITIALIZED: no step has ended yet.
 * - RUNNING: some steps have ended, others are pending.
 * - FINISHED: every step finished (a request that only suppresses or
 *   unsuppresses is FINISHED as soon as it is stored).
 * - FAILED: every step ended and at least one failed.
 */
export const REGULATION_STATUSES = ['INITIALIZED', 'RUNNING', 'FINISHED', 'FAILED'] as const;
export type RegulationStatus = (typeof REGULATION_STATUSES)[number];

export type RegulationStepStatus = 'PENDING' | 'FINISHED' | 'FAILED';

export const SUBJECT_TYPE = 'USER_ID';
export const MAX_SUBJECTS = 5_000;
export const MAX_SOURCE_IDS = 1_000;
/**
 * Subject × source pairs a request that names sources may suppress or lift.
 * With `sourceIds` the stores keep one suppression row per pair, written in
 * the request's one transaction (what makes a 201 mean "in force"), and every
 * node holds them in memory. 5,000 ids over 1,000 named sources made 5,000,000
 * rows: on SQLite the POST held the event loop (ingest, /healthz) for 64 s
 * and added 1.6 GB to the file; on PostgreSQL the POST took 218 s holding the
 * config version's row lock, and each node's suppression list grew by 1.2 GB.
 * The bound is what a request for every source writes (one row per subject,
 * whatever the number of sources): no request costs more than that one.
 */
export const MAX_SUPPRESSION_PAIRS = 5_000;

/** What a request type does; the stores and the runner follow this table. */
export interface RegulationEffects {
  /** Erases the subjects' stored messages and sends a `delete` message per subject, per affected source. */
  readonly deletes: boolean;
  /** `add` starts suppressing the subjects on the affected sources; `remove` lifts suppressions. */
  readonly suppression: 'add' | 'remove' | undefined;
}

const EFFECTS: Readonly<Record<RegulationType, RegulationEffects>> = {
  DELETE_ONLY: { deletes: true, suppression: undefined },
  SUPPRESS_WITH_DELETE: { deletes: true, suppression: 'add' },
  SUPPRESS_ONLY: { deletes: false, suppression: 'add' },
  UNSUPPRESS: { deletes: false, suppression: 'remove' },
};

export function regulationEffects(type: RegulationType): RegulationEffects {
  return EFFECTS[type];
}

/** A new request's status: a deletion has work to do unless no source is affected; the rest is done on creation. */
export function initialStatus(type: RegulationType, affectedSources: number): RegulationStatus {
  return EFFECTS[type].deletes && affectedSources > 0 ? 'INITIALIZED' : 'FINISHED';
}

/** A request as the admin API takes it, checked; ids de-duplicated in their first order. */
export interface RegulationRequest {
  readonly regulationType: RegulationType;
  readonly subjectIds: readonly string[];
  /** Undefined means every source, including sources created later (for suppression). */
  readonly sourceIds: readonly string[] | undefined;
}

const FIELDS = ['regulationType', 'subjectType', 'subjectIds', 'sourceIds'];

/**
 * Checks an untrusted request body. The problem names the field (and the
 * index of a bad array element) so that a script can point at it.
 * Whether the source ids exist is for the caller to check.
 */
export function parseRegulationRequest(input: unknown): { ok: true; request: RegulationRequest } | { ok: false; problem: string } {
  if (!isJsonObject(input)) return { ok: false, problem: 'the body must be a JSON object' };
  for (const key of Object.keys(input)) {
    if (!FIELDS.includes(key)) return { ok: false, problem: `unknown field "${key.slice(0, 60)}"; allowed: ${FIELDS.join(', ')}` };
  }
  const type = input['regulationType'];
  if (typeof type !== 'string' || !(REGULATION_TYPES as readonly string[]).includes(type)) {
    return { ok: false, problem: `regulationType must be one of ${REGULATION_TYPES.join(', ')}` };
  }
  if (input['subjectType'] !== SUBJECT_TYPE) return { ok: false, problem: `subjectType must be "${SUBJECT_TYPE}"` };

  // A subject is a userId: bounded and named as ingest stores them (see MAX_ID_BYTES, storedId).
  const listed = idList(input['subjectIds'], 'subjectIds', MAX_SUBJECTS, { fits: idWithinBounds, bound: `${MAX_ID_BYTES} bytes (UTF-8)` });
  if (typeof listed === 'string') return { ok: false, problem: listed };
  const subjects = [...new Set(listed.map(storedId))];
  let sources: string[] | undefined;
  if (input['sourceIds'] !== undefined) {
    const checked = idList(input['sourceIds'], 'sourceIds', MAX_SOURCE_IDS, { fits: (id) => id.length <= 200, bound: '200 characters' });
    if (typeof checked === 'string') return { ok: false, problem: `${checked} (omit sourceIds to mean every source)` };
    sources = checked;
    const problem = pairsProblem(type as RegulationType, subjects.length, sources.length);
    if (problem !== undefined) return { ok: false, problem };
  }
  return { ok: true, request: { regulationType: type as RegulationType, subjectIds: subjects, sourceIds: sources } };
}

/**
 * Why a request naming `sources` sources for `subjects` subjects is too
 * large ({@link MAX_SUPPRESSION_PAIRS}), with what to do instead; undefined
 * when it is not. A request that only deletes writes no suppression: its
 * work is one step per source, each its own transaction in the background.
 */
export function pairsProblem(type: RegulationType, subjects: number, sources: number): string | undefined {
  if (EFFECTS[type].suppression === undefined || subjects * sources <= MAX_SUPPRESSION_PAIRS) return undefined;
  const n = (value: number): string => value.toLocaleString('en-US');
  // MAX_SOURCE_IDS is below the bound, so one subject a request always fits.
  const perRequest = Math.floor(MAX_SUPPRESSION_PAIRS / sources);
  const instead = type === 'UNSUPPRESS' ? "omit sourceIds to lift all of these users' suppressions" : 'omit sourceIds to suppress on every source (one suppression per user)';
  return (
    `subjectIds × sourceIds is ${n(subjects)} × ${n(sources)} = ${n(subjects * sources)} subject-source pairs; a request that names sources may ` +
    `${type === 'UNSUPPRESS' ? 'lift' : 'suppress'} at most ${n(MAX_SUPPRESSION_PAIRS)}: send at most ${n(perRequest)} subjectIds a request for these ${n(sources)} sources, or ${instead}`
  );
}

/**
 * Why an `UNSUPPRESS` without `sourceIds` is too large: it lifts every
 * suppression of its subjects, one row per subject and source (plus one
 * for every source), so its cost is what they have, which requests within
 * {@link MAX_SUPPRESSION_PAIRS} (or older data) can still make large: 500,000
 * rows lifted at once held SQLite's event loop for 11.7 s. `inForce`: their
 * rows, counted up to one past the bound. Undefined when it fits.
 */
export function liftProblem(subjects: number, inForce: number): string | undefined {
  if (inForce <= MAX_SUPPRESSION_PAIRS) return undefined;
  const n = (value: number): string => value.toLocaleString('en-US');
  return (
    `these ${n(subjects)} subjectIds have more than ${n(MAX_SUPPRESSION_PAIRS)} suppressions in force (one per user and source named for it, one per user for every source); ` +
    `a request may lift at most ${n(MAX_SUPPRESSION_PAIRS)}: send fewer subjectIds a request, or name sourceIds`
  );
}

/** The ids, de-duplicated; or the problem. */
function idList(value: unknown, field: string, max: number, each: { readonly fits: (id: string) => boolean; readonly bound: string }): string[] | string {
  if (!Array.isArray(value) || value.length === 0 || value.length > max) {
    return `${field} must be an array of 1 to ${max} ids`;
  }
  const seen = new Set<string>();
  for (const [index, id] of value.entries()) {
    if (typeof id !== 'string' || id === '' || !each.fits(id)) {
      return `${field}[${index}] must be a non-empty string of at most ${each.bound}`;
    }
    seen.add(id);
  }
  return [...seen];
}

/**
 * The stored text of the `delete` message sent for one subject on one source;
 * the Webhooks destination sends it as is (no `version`, see webhook-payload).
 */
export function deleteMessageBody(userId: string, messageId: string, at: number): string {
  return JSON.stringify({ type: 'delete', userId, timestamp: new Date(at).toISOString(), messageId });
}

/** The debugger's reason for a message dropped by a suppression. */
export function suppressionReason(regulationId: string): string {
  return `user is suppressed by regulation ${regulationId}`;
}
