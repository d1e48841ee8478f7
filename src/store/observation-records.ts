import type { MessageStatus } from '../domain/message.js';
import { ObservedBatch, type ObservedEventRow, type ObservedPathRow, type ObservedPosition } from '../domain/observed-schema.js';
import { ViolationBatch, type ViolationRows } from '../domain/plan-violation-counts.js';
import type { IngestEntry } from './records.js';

/**
 * The observed schema and the tracking-plan violation counts of sources,
 * kept by {@link IngestStore.processRawRequests} in the commit of the
 * messages they count (added up per batch, one upsert per table), bounded
 * (src/domain/observed-schema.ts, src/domain/plan-violation-counts.ts).
 */
export interface ObservationStore {
  /**
   * The source's events summed over `days` (day starts; at most about 32,
   * see observedDays), biggest count first, then by type and event in code
   * point order; those after `after` in that order, at most `limit`; and the
   * messages of those days the caps left unrecorded.
   */
  observedEvents(sourceId: string, days: readonly number[], after: ObservedPosition | undefined, limit: number): Promise<{ events: ObservedEventRow[]; unrecordedMessages: number }>;
  /** The first `perEvent` paths (in code point order) of each of `events`, summed over `days`; only those events' rows are read. */
  observedPaths(sourceId: string, days: readonly number[], events: ReadonlyArray<{ type: string; event: string }>, perEvent: number): Promise<ObservedPathRow[]>;
  /** The source's violation counts summed over the hours from `sinceHour` on, each key with its latest example. */
  violationCounts(sourceId: string, sinceHour: number): Promise<ViolationRows>;
  /** Deletes observed-schema days before `schemaBefore` and violation hours before `violationsBefore`; resolves how many rows went. */
  pruneObservations(schemaBefore: number, violationsBefore: number): Promise<number>;
}

/** Statuses whose messages a source received as valid calls: observed. (Rejected ones are not calls; duplicates were counted once.) */
const OBSERVED: ReadonlySet<MessageStatus> = new Set(['accepted', 'blocked', 'filtered', 'suppressed']);

/** A processing batch's observed schema and violation counts, added up in memory. */
export interface Observations {
  readonly schema: ObservedBatch;
  readonly violations: ViolationBatch;
}

/** A processing batch's observations, added up in memory from its entries and the statuses the store gave them. */
export function observeEntries(entries: readonly IngestEntry[], statuses: readonly MessageStatus[]): Observations {
  const schema = new ObservedBatch();
  const violations = new ViolationBatch();
  entries.forEach((entry, i) => {
    if (!OBSERVED.has(statuses[i]!)) return;
    if (entry.shape !== undefined) schema.add(entry.sourceId, entry.receivedAt, entry.shape);
    if (entry.violations !== undefined && entry.messageId !== undefined) {
      violations.add(entry.sourceId, entry.receivedAt, entry.messageId, entry.shape?.type ?? entry.type ?? '', entry.shape?.event ?? '', entry.violations);
    }
  });
  return { schema, violations };
}

/** A batch's observations as if every entry were stored as built (none a duplicate), added up before the store has decided. */
export function observedAsBuilt(entries: readonly IngestEntry[]): Observations {
  return observeEntries(entries, entries.map((entry) => entry.status));
}
