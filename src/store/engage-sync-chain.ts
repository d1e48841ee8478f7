import type { DeliveryTarget } from '../domain/routing.js';
import type { IngestEntry } from './records.js';

/**
 * Engage sync chains, the rule both stores follow.
 *
 * For one computation, one source and one receiver key (`u:<userId>`, else
 * `a:<anonymousId>`), a newer sync must never overtake an older one and the
 * last one a receiver gets must be the newest value, whatever the
 * destination's `ordering` says and however its deliveries are retried. So,
 * when Engage commits a sync:
 *
 *  1. older deliveries of its chain that are still pending and not in flight
 *     (waiting to be claimed, waiting for a retry, parked, or leased by a
 *     worker whose lease ran out) are dropped: the newer value supersedes
 *     them (their messages stay; a dropped delivery is never sent);
 *  2. if one is still in flight (leased), the new delivery is created
 *     parked: pending, due at {@link PARKED_AT}, which no claim reaches;
 *  3. {@link EngageStore.releaseEngageSyncs} later releases a parked
 *     delivery (due now) once nothing of its chain is in flight any more,
 *     dropping an older one that came back to wait for a retry.
 *
 * So at most one delivery of a chain is ever claimable or in flight, and it
 * is the newest value but while an older one is in flight.
 */

/** Where a parked delivery is due: the largest time a JavaScript Date holds (admin views still show it). */
export const PARKED_AT = 8_640_000_000_000_000;

/** A sync's delivery to one destination, on its chain. */
export interface SyncChain {
  /** The entry's index in the commit. */
  readonly index: number;
  readonly computationId: string;
  /** The stored `sync_key`, see {@link chainKey}. */
  readonly key: string;
  readonly sourceId: string;
  readonly destination: DeliveryTarget;
}

/**
 * One row per chained delivery in a commit: each destination of a sync but an
 * ordered Webhooks destination (`orderKey`: its order keeps the key's syncs
 * in order; see {@link orderedSyncOf}). A second sync of a chain in the same
 * commit is refused (the evaluator keeps the last).
 */
export function syncChainsOf(entries: readonly IngestEntry[]): SyncChain[] {
  const seen = new Set<string>();
  const chains: SyncChain[] = [];
  entries.forEach((entry, index) => {
    const sync = entry.engageSync;
    if (sync === undefined) return;
    const chained = entry.destinations.filter((destination) => !(destination === 'webhooks' && entry.orderKey !== undefined));
    if (chained.length === 0) return;
    const id = chainId(entry.sourceId, sync.computationId, sync.key);
    if (seen.has(id)) throw new Error(`two syncs of one chain in one commit: ${id}`);
    seen.add(id);
    for (const destination of chained) {
      chains.push({ index, computationId: sync.computationId, key: chainKey(entry.sourceId, sync.key, destination), sourceId: entry.sourceId, destination });
    }
  });
  return chains;
}

/** Why a sync of a deleted computation that waits in an ordered key's chain is not sent (ClaimedDelivery.cancelled). */
export function cancelledSyncReason(kind: string): string {
  return `not sent: its ${kind === 'audience' ? 'audience' : 'computed trait'} was deleted`;
}

/**
 * The computation of a sync that an ordered Webhooks destination gets: its
 * delivery is on the key's order, not on a sync chain, and is stored naming
 * the computation (`sync_computation_id`, no `sync_key`) so that deleting
 * the computation cancels it where it waits (see
 * EngageStore.deleteComputation). Undefined for any other entry.
 */
export function orderedSyncOf(entry: IngestEntry): string | undefined {
  return entry.engageSync !== undefined && entry.orderKey !== undefined && entry.destinations.includes('webhooks') ? entry.engageSync.computationId : undefined;
}

/**
 * The stored `sync_key`: the source, the destination and the receiver key (a
 * computation's chains are found by its id alone). Each destination has its
 * own chain, so a delivery in flight to one never holds up, nor is dropped
 * by, another destination's. The Webhooks destination's has no destination
 * part (as before function destinations), a function's is
 * `<source> function:<id> <key>`: the receiver key always starts `u:` or `a:`,
 * so no user id can make one chain's key another's.
 */
export function chainKey(sourceId: string, key: string, destination: DeliveryTarget): string {
  return destination === 'webhooks' ? `${sourceId} ${key}` : `${sourceId} ${destination} ${key}`;
}

function chainId(sourceId: string, computationId: string, key: string): string {
  return `${computationId} ${sourceId} ${key}`;
}
