import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import { adminApi } from './admin/admin-api.js';
import { AdminAuth } from './admin/admin-auth.js';
import { SourceAdmin } from './admin/source-admin.js';
import { WebhookAdmin } from './admin/webhook-admin.js';
import type { Config } from './config.js';
import { listensOnEveryInterface } from './domain/listen-address.js';
import { engageLagReader } from './engage/engage-lag.js';
import { Metrics } from './metrics.js';
import { buildServer } from './http/server.js';
import { GroupCommitter } from './ingest/group-commit.js';
import { ProcessingBacklog } from './ingest/processing-backlog.js';
import { type BackgroundStages, startBackgroundStages } from './pipeline/background-stages.js';
import { ThreadedStages } from './pipeline/threaded-stages.js';
import { SuppressionList } from './regulations/suppression-list.js';
import { SourceDirectory } from './sources/source-directory.js';
import { type DataDirLock, lockDataDir } from './store/sqlite/data-dir-lock.js';
import { startTracing } from './telemetry/start-tracing.js';
import type { Tracing } from './telemetry/tracing.js';
import { openStore } from './store/open-store.js';
import type { Store } from './store/store.js';
import { enableLinearRegExpFallback } from './util/regexp-fallback.js';

/** What `startSwitchyard` throws when another `serve` holds the SQLite data folder (the CLI reports it in one line). */
export { DataDirInUseError } from './store/sqlite/data-dir-lock.js';
export { openStore } from './store/open-store.js';

export interface RunningSwitchyard {
  readonly port: number;
  readonly store: Store;
  /**
   * What the person starting the service must see once (`serve` prints it):
   * a generated admin token nobody has seen yet, and the `default` source
   * when this start created it or when the token is new. Never logged.
   */
  readonly welcome: Welcome | undefined;
  /** Stops taking requests, finishes in-flight work, closes the store. */
  close(): Promise<void>;
}

export interface Welcome {
  readonly adminToken?: string;
  readonly defaultSource?: { readonly id: string; readonly writeKey: string };
}

const CONFIG_POLL_MS = 1_000;
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
 * Admission bound on what is stored but not yet processed into messages
 * (raw requests, see `ingest/raw-processor.ts`): past this many messages,
 * requests get 503 `overloaded`. At the processing stage's measured rates
 * (see docs/performance.md) about ten seconds of work, so a sustained
 * overload is refused within seconds instead of piling up unprocessed
 * messages without limit, while a burst that ingest takes faster than
 * processing runs is absorbed.
 */
const MAX_UNPROCESSED_MESSAGES = 100_000;
/** How often ingest reads the processing backlog from the store. */
const UNPROCESSED_POLL_MS = 200;

/**
 * Starts `serve`: the HTTP server and the background loops over one store.
 * On the SQLite store it first takes the data folder for this process
 * (throws `DataDirInUseError` when another `serve` holds it), before anything
 * reads or writes the store, and lets it go when closed.
 */
export async function startSwitchyard(config: Config, logger: Logger = pino({ level: config.logLevel })): Promise<RunningSwitchyard> {
  enableLinearRegExpFallback();
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
    welcome: running.welcome,
    close: () => running.close().finally(() => lock?.release()),
  };
}

async function startServing(config: Config, logger: Logger): Promise<RunningSwitchyard> {
  // Off: nothing of OpenTelemetry is loaded (see telemetry/start-tracing.ts).
  const tracing = await startTracing(config.tracing);
  if (config.tracing.enabled) {
    logger.info({ endpoint: config.tracing.tracesEndpoint, sampler: config.tracing.sampler, ratio: config.tracing.ratio }, 'exporting OpenTelemetry traces');
  }
  let store: Store;
  try {
    store = await openStore(config, logger);
  } catch (error) {
    await tracing.shutdown();
    throw error;
  }
  const now = Date.now;
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
  // Started once the server listens (ingest needs only the store); until then there is nothing to wake.
  const background: { stages?: BackgroundStages } = {};

  const committer = new GroupCommitter(store, {
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
  const unprocessed = new ProcessingBacklog(store, { maxMessages: MAX_UNPROCESSED_MESSAGES, pollMs: UNPROCESSED_POLL_MS, onError });
  await unprocessed.start();
  metrics.watchProcessingBacklog(() => ({ messages: unprocessed.messages, lagMs: unprocessed.lagMs(now()) }));
  metrics.watchEngageLag(engageLagReader(store, now, onError));
  const app = buildServer({
    logger,
    trustProxy: config.trustProxy,
    store,
    metrics,
    tracking: { directory, committer, unprocessed, suppressionsVersion: () => suppressions.configVersion, metrics, now, tracing },
    browser: { directory, publicUrl: config.publicUrl },
    admin: adminApi({ store, config, now, auth, sources, webhooks, suppressions, stages: () => background.stages, onError, directory }),
    connections: { total: config.maxConnections, perAddress: config.maxConnectionsPerAddress },
    processing: () => background.stages?.running() ?? false,
  });

  let stages: BackgroundStages;
  try {
    await app.listen({ port: config.port, host: config.host });
    stages = await startStages(config, logger, { store, metrics, directory, suppressions, now, tracing });
  } catch (error) {
    // A server left listening without its stages would answer /healthz and take
    // messages nobody processes: close everything, so the process ends.
    await app.close();
    unprocessed.stop();
    directory.stop();
    suppressions.stop();
    await store.close();
    await tracing.shutdown();
    throw error;
  }
  const port = (app.server.address() as AddressInfo).port;
  background.stages = stages;
  logger.info({ port, host: config.host, store: store.capabilities.name }, 'Switchyard is listening');
  // A token never shown before comes with the default source again: a failed first start showed neither.
  const shownSource = defaultSource ?? (createdToken === undefined ? undefined : (await store.listSources()).find((s) => s.name === 'default'));
  const welcome: Welcome | undefined =
    createdToken === undefined && shownSource === undefined
      ? undefined
      : {
          ...(createdToken !== undefined && { adminToken: createdToken }),
          ...(shownSource !== undefined && { defaultSource: { id: shownSource.id, writeKey: shownSource.writeKey } }),
        };
  if (welcome !== undefined && listensOnEveryInterface(config.host)) {
    // A first start is usually a try on a laptop: say that the port is open to the network, and how to keep it local.
    logger.warn(
      { host: config.host, port },
      `listening on every interface (HOST=${config.host}): other machines that can reach this one can reach port ${port}; set HOST=127.0.0.1 to listen on this machine only`,
    );
  }

  let closing: Promise<void> | undefined;
  return {
    port,
    store,
    welcome,
    close() {
      closing ??= (async () => {
        await app.close();
        unprocessed.stop();
        await stages.stop();
        directory.stop();
        suppressions.stop();
        await store.close();
        // Exports the spans still batched (bounded by OTEL_EXPORTER_OTLP_TIMEOUT).
        await tracing.shutdown().catch((error: unknown) => logger.warn({ err: error }, 'exporting the last spans failed'));
      })();
      return closing;
    },
  };
}

/**
 * Starts the background stages in the stage thread when a core is there for
 * it, else on this thread. `:memory:` stores stay on this thread: another
 * connection would open a different, empty database.
 */
async function startStages(
  config: Config,
  logger: Logger,
  local: { store: Store; metrics: Metrics; directory: SourceDirectory; suppressions: SuppressionList; now: () => number; tracing: Tracing },
): Promise<BackgroundStages> {
  const inMemory = config.databaseUrl === undefined && config.dataDir === ':memory:';
  if (config.workers === 0 || inMemory) return startBackgroundStages({ ...local, config, logger });
  const threaded = await ThreadedStages.start(config, logger);
  local.metrics.forward(() => threaded.metrics());
  return threaded;
}

/** Creates the `default` source on the first start of an empty store, in one process only. */
async function createDefaultSourceOnce(store: Store, sources: SourceAdmin): Promise<{ id: string; writeKey: string } | undefined> {
  if (!(await store.insertSettingIfAbsent('bootstrapped_at', new Date().toISOString()))) return undefined;
  if ((await store.listSources()).length > 0) return undefined;
  return sources.create({ name: 'default' });
}
