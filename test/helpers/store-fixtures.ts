import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { IngestEntry, Store } from '../../src/store/store.js';
import { freshDatabase } from './postgres.js';

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

/** A migrated store for one test, and how to be rid of it. */
export interface OpenedStore {
  readonly store: Store;
  readonly cleanup: () => Promise<void>;
}

/** An embedded store in memory, migrated. */
export async function openMemoryStore(): Promise<OpenedStore> {
  const store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
  await store.migrate();
  return { store, cleanup: async () => store.close() };
}

/** A PostgreSQL store on a fresh database, migrated; cleanup closes it and drops the database. */
export async function openFreshPostgresStore(): Promise<OpenedStore> {
  const fresh = await freshDatabase();
  const store = PostgresStore.open({ databaseUrl: fresh.url, durability: 'process' });
  await store.migrate();
  return {
    store,
    cleanup: async () => {
      await store.close();
      await fresh.drop();
    },
  };
}
