import type { IngestEntry } from '../store/store.js';

/** A chain: computation, source, receiver key (see src/store/engage-sync-chain.ts). */
function chainOf(entry: IngestEntry): string | undefined {
  const sync = entry.engageSync;
  return sync === undefined ? undefined : `${sync.computationId} ${entry.sourceId} ${sync.key}`;
}

/**
 * Keeps the last sync of each chain (and every other entry), in order: within
 * one commit an earlier value of a chain would be superseded at once. An
 * earlier sync that an ordered Webhooks destination also gets (`orderKey`)
 * stays for that destination alone: none may be dropped from its order (it
 * keeps its `engageSync`, which names its computation; it is on no sync
 * chain, see syncChainsOf).
 */
export function lastSyncPerChain(entries: readonly IngestEntry[]): IngestEntry[] {
  const last = new Map<string, number>();
  entries.forEach((entry, index) => {
    if (entry.engageSync !== undefined) last.set(chainOf(entry)!, index);
  });
  const kept: IngestEntry[] = [];
  entries.forEach((entry, index) => {
    if (entry.engageSync === undefined || last.get(chainOf(entry)!) === index) kept.push(entry);
    else if (entry.orderKey !== undefined && entry.destinations.includes('webhooks')) kept.push({ ...entry, destinations: ['webhooks'] });
  });
  return kept;
}
