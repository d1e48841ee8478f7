import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import { AdminAuth } from './admin/admin-auth.js';
import { SourceAdmin } from './admin/source-admin.js';
import { type Config, ConfigError } from './config.js';
import { DEDUPLICATION_WINDOW_MS } from './domain/message.js';
import { Metrics } from './http/metrics.js';
import { buildServer } from './http/server.js';
import { GroupCommitter } from './ingest/group-commit.js';
import { SourceDirectory } from './sources/source-directory.js';
import { SqliteStore } from './store/sqlite/sqlite-store.js';
import type { Store } from './store/store.js';
import { newMessageId } from './util/ids.js';

/** The only place that picks a store adapter. Resolves a migrated store. */
export async function openStore(config: Config): Promise<Store> {
  if (config.databaseUrl !== undefined) {
    throw new ConfigError('DATABASE_URL is set, but this build of Switchyard has no PostgreSQL store yet');
  }
  const store = SqliteStore.open({ dataDir: config.dataDir, durability: config.durability });
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

export interface RunningSwitchyard {
  readonly port: number;
  readonly store: Store;
  /** Stops taking requests, finishes in-flight work, closes the store. */
  close(): Promise<void>;
}

const CONFIG_POLL_MS = 1_000;
const PRUNE_EVERY_MS = 3_600_000;
const MAX_ENTRIES_PER_COMMIT = 5_000;

/** Starts `serve`: the HTTP server and the background loops over one store. */
export async function startSwitchyard(config: Config, logger: Logger = pino({ level: config.logLevel })): Promise<RunningSwitchyard> {
  const store = await openStore(config);
  const now = Date.now;
  const metrics = new Metrics();
  const onError = (error: unknown): void => logger.error({ err: error }, 'background task failed');

  const { auth, createdToken } = await AdminAuth.load(store, config.adminToken);
  const directory = new SourceDirectory(store, { pollMs: CONFIG_POLL_MS, onError });
  const sources = new SourceAdmin(store, now, directory);
  await directory.start();
  const defaultSource = await createDefaultSourceOnce(store, sources);

  const committer = new GroupCommitter(store, {
    now,
    maxEntries: MAX_ENTRIES_PER_COMMIT,
    onCommit: (entries, ms) => {
      metrics.groupCommitSize.observe(entries);
      metrics.groupCommitSeconds.observe(ms / 1000);
    },
  });
  const app = buildServer({
    logger,
    trustProxy: config.trustProxy,
    store,
    metrics,
    tracking: { directory, committer, metrics, now, newMessageId },
    admin: { auth, sources },
  });

  const pruner = setInterval(() => {
    const at = now();
    store.prune(at - config.retentionMs, at - DEDUPLICATION_WINDOW_MS).catch(onError);
  }, PRUNE_EVERY_MS);
  pruner.unref();

  await app.listen({ port: config.port, host: config.host });
  const port = (app.server.address() as AddressInfo).port;
  logger.info({ port, host: config.host, store: store.capabilities.name }, 'Switchyard is listening');
  if (createdToken !== undefined || defaultSource !== undefined) {
    printWelcome(port, createdToken, defaultSource?.writeKey);
  }

  let closing: Promise<void> | undefined;
  return {
    port,
    store,
    close() {
      closing ??= (async () => {
        clearInterval(pruner);
        await app.close();
        directory.stop();
        await store.close();
      })();
      return closing;
    },
  };
}

/** Creates the `default` source on the first start of an empty store, in one process only. */
async function createDefaultSourceOnce(store: Store, sources: SourceAdmin): Promise<{ writeKey: string } | undefined> {
  if (!(await store.insertSettingIfAbsent('bootstrapped_at', new Date().toISOString()))) return undefined;
  if ((await store.listSources()).length > 0) return undefined;
  return sources.create({ name: 'default' });
}

/** Secrets go to stdout once, for the person starting the service; never to the log. */
function printWelcome(port: number, adminToken: string | undefined, writeKey: string | undefined): void {
  const lines = ['', 'Switchyard is ready.'];
  if (writeKey !== undefined) lines.push(`  Write key of the "default" source: ${writeKey}`);
  if (adminToken !== undefined) lines.push(`  Admin token (shown only this once; keep it): ${adminToken}`);
  if (writeKey !== undefined) {
    lines.push(
      '  Try it:',
      `    curl -u '${writeKey}:' -H 'Content-Type: application/json' \\`,
      `      -d '{"userId":"u1","event":"Signed Up"}' http://127.0.0.1:${port}/v1/track`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n\n`);
}
