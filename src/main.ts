import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import { AdminAuth } from './admin/admin-auth.js';
import { DebuggerAdmin } from './admin/debugger-admin.js';
import { debuggerRoutes } from './admin/debugger-routes.js';
import { DeliveryAdmin } from './admin/delivery-admin.js';
import { EngageAdmin } from './admin/engage-admin.js';
import { engageRoutes } from './admin/engage-routes.js';
import { OverviewAdmin } from './admin/overview-admin.js';
import { overviewRoutes } from './admin/overview-routes.js';
import { deliveryRoutes } from './admin/delivery-routes.js';
import { RegulationAdmin } from './admin/regulation-admin.js';
import { ReplayAdmin } from './admin/replay-admin.js';
import { replayRoutes } from './admin/replay-routes.js';
import { regulationRoutes } from './admin/regulation-routes.js';
import { SourceAdmin } from './admin/source-admin.js';
import { WebhookAdmin } from './admin/webhook-admin.js';
import { WebhookTester } from './admin/webhook-test.js';
import type { Config } from './config.js';
import { DeliveryWorker } from './delivery/delivery-worker.js';
import { DEDUPLICATION_WINDOW_MS } from './domain/message.js';
import { Metrics } from './http/metrics.js';
import { buildServer } from './http/server.js';
import { EngageRunner } from './engage/engage-runner.js';
import { GroupCommitter } from './ingest/group-commit.js';
import { RegulationRunner } from './regulations/regulation-runner.js';
import { SuppressionList } from './regulations/suppression-list.js';
import { ReplayRunner } from './replays/replay-runner.js';
import { SourceDirectory } from './sources/source-directory.js';
import { PostgresStore } from './store/postgres/postgres-store.js';
import { type DataDirLock, lockDataDir } from './store/sqlite/data-dir-lock.js';
import { SqliteStore } from './store/sqlite/sqlite-store.js';
import type { Store } from './store/store.js';
import { newMessageId } from './util/ids.js';

/** What `startSwitchyard` throws when another `serve` holds the SQLite data folder (the CLI reports it in one line). */
export { DataDirInUseError } from './store/sqlite/data-dir-lock.js';

/**
 * The only place that picks a store adapter. Resolves a migrated store.
 * `logger` hears the PostgreSQL connection errors nobody awaits (a pooled
 * connection or the LISTEN connection dropping; both are replaced). The CLI
 * passes none: its short runs do not LISTEN, and a query that fails tells it.
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

export interface RunningSwitchyard {
  readonly port: number;
  readonly store: Store;
  /** Stops taking requests, finishes in-flight work, closes the store. */
  close(): Promise<void>;
}

const CONFIG_POLL_MS = 1_000;
const REGULATION_POLL_MS = 5_000;
const REPLAY_POLL_MS = 2_000;
/** Also how soon an expiring audience window is noticed without new messages. */
const ENGAGE_POLL_MS = 1_000;
const PRUNE_EVERY_MS = 3_600_000;
// A synchronous SQLite commit blocks the event loop: bigger groups raise every request's latency.
const MAX_ENTRIES_PER_COMMIT = 1_000;
/**
 * Admission bound of ingest: past this many messages waiting for a commit,
 * requests get 503 `overloaded`. Eight full commits: the wait stays short
 * (at the measured 7,800 calls/s to 14,600 batched messages/s on SQLite,
 * 0.5 to 1 s, far below the 10 s after which Segment's Node library gives
 * up on a request), while normal concurrency never meets it: 64 clients
 * each sending a 100-message batch (the ingest bench) are 6,400 messages,
 * and three batches of the maximum 2,500 fit.
 */
const MAX_COMMIT_BACKLOG = 8 * MAX_ENTRIES_PER_COMMIT;
/**
 * The same bound in bytes of message JSON, for big messages: 8,000 messages
 * of 32 KB would otherwise be 256 MB. 16 MB is about two seconds of commits
 * (~600-byte messages at the rates above), or 32 full 500 KB batches.
 */
const MAX_COMMIT_BACKLOG_BYTES = 16 * 1024 * 1024;
/**
 * The same bound in requests. A waiting single call holds about 7 KB
 * (request, reply, parsed body) for a message of a few hundred bytes, so
 * floods of small calls are bounded by their number: 2,000 is two full
 * commits of them, about 14 MB. Clients that do not pipeline have one request
 * waiting per connection, far fewer.
 */
const MAX_COMMIT_BACKLOG_REQUESTS = 2 * MAX_ENTRIES_PER_COMMIT;

/**
 * Starts `serve`: the HTTP server and the background loops over one store.
 * On the SQLite store it first takes the data folder for this process
 * (throws `DataDirInUseError` when another `serve` holds it), before anything
 * reads or writes the store, and lets it go when closed.
 */
export async function startSwitchyard(config: Config, logger: Logger = pino({ level: config.logLevel })): Promise<RunningSwitchyard> {
  const lock: DataDirLock | undefined =
    config.databaseUrl === undefined && config.dataDir !== ':memory:' ? lockDataDir(config.dataDir) : undefined;
  let running: RunningSwitchyard;
  try {
    running = await startServing(config, logger);
  } catch (error) {
    lock?.release();
    throw error;
  }
  return {
    port: running.port,
    store: running.store,
    close: () => running.close().finally(() => lock?.release()),
  };
}

async function startServing(config: Config, logger: Logger): Promise<RunningSwitchyard> {
  const store = await openStore(config, logger);
  const now = Date.now;
  const preparing = Date.now();
  await store.prepareIngest?.(now() - DEDUPLICATION_WINDOW_MS);
  if (Date.now() - preparing > 1_000) logger.info({ ms: Date.now() - preparing }, 'ingest prepared (de-duplication index loaded)');
  const metrics = new Metrics();
  const onError = (error: unknown): void => logger.error({ err: error }, 'background task failed');

  const { auth, createdToken } = await AdminAuth.load(store, config.adminToken);
  const directory = new SourceDirectory(store, { pollMs: CONFIG_POLL_MS, onError });
  const sources = new SourceAdmin(store, now, directory);
  const webhooks = new WebhookAdmin(store, now, { allowPrivateReceivers: config.allowPrivateReceivers, directory });
  await directory.start();
  const defaultSource = await createDefaultSourceOnce(store, sources);

  const suppressions = new SuppressionList(store, { pollMs: CONFIG_POLL_MS, onError });
  await suppressions.start();
  const runner = new RegulationRunner({ store, now, newMessageId, pollMs: REGULATION_POLL_MS, onError });
  const replays = new ReplayRunner({ store, directory, suppressions, now, pollMs: REPLAY_POLL_MS, onError });
  const engage = new EngageRunner({ store, now, newMessageId, pollMs: ENGAGE_POLL_MS, onError });

  const committer = new GroupCommitter(store, {
    now,
    maxEntries: MAX_ENTRIES_PER_COMMIT,
    maxBacklog: MAX_COMMIT_BACKLOG,
    maxBacklogBytes: MAX_COMMIT_BACKLOG_BYTES,
    maxBacklogRequests: MAX_COMMIT_BACKLOG_REQUESTS,
    onCommit: (entries, ms) => {
      metrics.groupCommitSize.observe(entries);
      metrics.groupCommitSeconds.observe(ms / 1000);
    },
  });
  metrics.watchCommitBacklog(() => committer.backlog);
  const app = buildServer({
    logger,
    trustProxy: config.trustProxy,
    store,
    metrics,
    tracking: { directory, committer, metrics, now, newMessageId, screen: (entries) => suppressions.screen(entries) },
    browser: { directory, publicUrl: config.publicUrl },
    admin: {
      auth,
      sources,
      extensions: [
        deliveryRoutes(
          webhooks,
          new DeliveryAdmin(store, now),
          new WebhookTester(store, { allowPrivateReceivers: config.allowPrivateReceivers, userAgent: config.userAgent, timeoutMs: config.deliveryTimeoutMs, now }),
        ),
        debuggerRoutes({ admin: new DebuggerAdmin(store), streamStore: store, onError }),
        regulationRoutes(new RegulationAdmin(store, { now, suppressions, runner })),
        replayRoutes(new ReplayAdmin(store, { now, onCreated: () => replays.wake() })),
        engageRoutes(new EngageAdmin(store, { now, onChange: () => engage.definitionsChanged() })),
        overviewRoutes(new OverviewAdmin(store, now)),
      ],
    },
  });

  const pruner = setInterval(() => {
    const at = now();
    store.prune(at - config.retentionMs, at - DEDUPLICATION_WINDOW_MS).catch(onError);
  }, PRUNE_EVERY_MS);
  pruner.unref();

  await app.listen({ port: config.port, host: config.host });
  const port = (app.server.address() as AddressInfo).port;
  const worker = new DeliveryWorker({ store, destination: (sourceId) => directory.destination(sourceId, 'webhooks'), settings: config, logger, metrics });
  await worker.start();
  runner.start();
  replays.start();
  engage.start();
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
        await worker.stop();
        await runner.stop();
        await replays.stop();
        await engage.stop();
        directory.stop();
        suppressions.stop();
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
