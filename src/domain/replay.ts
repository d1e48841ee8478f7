import { type DestinationFilter, applyFilters } from './destination-filters.js';
import { isJsonObject } from './message.js';

/** What a replay re-delivers, as its request and the store keep it. */
export interface ReplaySelection {
  readonly from: number;
  readonly to: number;
  readonly types: readonly string[] | undefined;
  /** Only tracks with these event names (with `types`, other types still pass when listed). */
  readonly events: readonly string[] | undefined;
}

/** A stored message as a replay looks at it. */
export interface ReplayCandidate {
  readonly status: string;
  readonly type: string | undefined;
  readonly receivedAt: number;
  readonly body: string;
}

/**
 * Whether a stored message goes out again: it was `accepted` or `filtered`,
 * received in `[from, to)`, of a listed type, a track with a listed event
 * when `events` is given, and it passes the destination's filters as they
 * are now. Suppressed users are the caller's check (it holds the list).
 */
export function isReplayed(message: ReplayCandidate, selection: ReplaySelection, filters: readonly DestinationFilter[]): boolean {
  if (message.status !== 'accepted' && message.status !== 'filtered') return false;
  if (message.receivedAt < selection.from || message.receivedAt >= selection.to) return false;
  if (selection.types !== undefined && (message.type === undefined || !selection.types.includes(message.type))) return false;
  if (selection.events === undefined && filters.length === 0) return true;
  const parsed: unknown = JSON.parse(message.body);
  if (!isJsonObject(parsed)) return false;
  if (selection.events !== undefined) {
    if (message.type !== 'track' || typeof parsed['event'] !== 'string' || !selection.events.includes(parsed['event'])) return false;
  }
  return applyFilters(filters, parsed).kind === 'pass';
}
