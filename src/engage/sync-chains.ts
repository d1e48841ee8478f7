import type { IngestEntry } from '../store/store.js';

/** A chain: computation, source, receiver key (see src/store/engage-sync-chain.ts). */
function chainOf(entry: IngestEntry): string | undefined {
  const sync = entry.engageSync;
  return sync === undefined ? undefined : `${sync.computationId} ${entry.sourceId} ${sync.key}`;
}

/**
 * Keeps the last sync of each chain (and every other entry), in order: within
 * one commit an earlier value of a chain would be superseded at once.
 */
export function lastSyncPerChain(entries: readonly IngestEntry[]): IngestEntry[] {
  const last = new Map<string, number>();
  entries.forEach((entry, index) => {
    if (entry.engageSync !== undefined) last.set(chainOf(entry)!, index);
  });
  return entries.filter(
    (entry, index) => entry.engageSync === undefined || last.get(chainOf(entry)!) === index,
  );
}
