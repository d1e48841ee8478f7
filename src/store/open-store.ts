import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { PostgresStore } from './postgres/postgres-store.js';
import { SqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/**
 * The only place that picks a store adapter. Resolves a migrated store.
 * `logger` hears the PostgreSQL connection errors nobody awaits (a pooled
 * connection or the LISTEN connection dropping; both are replaced). The CLI
 * passes none: its short runs do not LISTEN, and a query that fails tells it.
 * `serve` calls it once per thread: each thread has its own connection(s).
 */
export async function openStore(config: Config, logger?: Logger): Promise<Store> {
  const store =
    config.databaseUrl === undefined
      ? SqliteStore.open({ dataDir: config.dataDir, durability: config.durability })
      : PostgresStore.open({
          databaseUrl: config.databaseUrl,
          durability: config.durability,
          onError: (error) => logger?.warn({ err: error }, 'PostgreSQL connection error'),
        });
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
