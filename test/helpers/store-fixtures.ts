import type { IngestEntry, Store } from '../../src/store/store.js';

/** A fixed "now" for store tests: times are what the caller passes, never the clock. */
export const T0 = 1_700_000_000_000;

let counter = 0;

/** An accepted track entry with a webhooks job and a fresh messageId, unless overridden. */
export function storeEntry(sourceId: string, overrides: Partial<IngestEntry> = {}): IngestEntry {
  counter++;
  return {
    sourceId,
    status: 'accepted',
    type: 'track',
    messageId: `fixture-${counter}`,
    userId: 'user-1',
    receivedAt: T0,
    body: JSON.stringify({ type: 'track', event: 'E', n: counter }),
    destinations: ['webhooks'],
    ...overrides,
  };
}

/** Inserts an enabled source whose id and name are `id`. */
export async function addSource(store: Store, id: string): Promise<void> {
  await store.insertSource({ id, name: id, writeKey: `key_${id}_${Math.random()}`, enabled: true, createdAt: T0, updatedAt: T0 });
}
