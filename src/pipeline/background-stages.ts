import { DAY_MS, OBSERVED_BOUNDS } from '../domain/observed-schema.js';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { type DeliverySettings, DeliveryWorker } from '../delivery/delivery-worker.js';
import type { HeldCircuit } from '../domain/circuits.js';
import { DEDUPLICATION_WINDOW_MS } from '../domain/message.js';
import { EngageRunner } from '../engage/engage-runner.js';
import { RawProcessor } from '../ingest/raw-processor.js';
import type { Metrics } from '../metrics.js';
import { RegulationRunner } from '../regulations/regulation-runner.js';
import type { SuppressionList } from '../regulations/suppression-list.js';
import { ReplayRunner } from '../replays/replay-runner.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { Store } from '../store/store.js';
import type { Tracing } from '../telemetry/tracing.js';
import { newMessageId } from '../util/ids.js';
import { sandboxLimits } from '../sandbox/sandbox-limits.js';
import { TransformStage } from '../transformations/transform-stage.js';

const REGULATION_POLL_MS = 5_000;
const REPLAY_POLL_MS = 2_000;
/** Also how soon an expiring audience window is noticed without new messages. */
const ENGAGE_POLL_MS = 1_000;
const PRUNE_EVERY_MS = 3_600_000;
/** Raw requests are processed on notification; this catches other nodes' and missed ones. */
const PROCESSING_POLL_MS = 1_000;
/** Deliveries waiting for their transformation are taken on notification; this catches other nodes'. */
const TRANSFORM_POLL_MS = 1_000;
/**
 * How long raw requests gather before processing takes them (see
 * RawProcessor): under load, one transaction for several of ingest's group
 * commits instead of one each (ingest.track: ~12 µs less CPU per message on
 * SQLite); it delays delivery and Engage by as much. 5 ms rather than 2:
 * at 1,000 single calls a second a pass then takes about five messages
 * instead of two, ~8% less CPU per message (delivery.latency, two sessions
 * on two hosts), for p50 +3 ms; see docs/architecture.md.
 */
const PROCESSING_GATHER_MS = 5;

/** What the ingest side may ask of the background stages, wherever they run. */
export interface BackgroundStages {
  /** A deletion request was just created: look for its steps now. */
  wakeRegulations(): void;
  /** A replay was just created: start it now. */
  wakeReplays(): void;
  /** A computed trait or audience was created, changed or deleted: reload the definitions now. */
  engageDefinitionsChanged(): void;
  /** The circuits the delivery worker's breaker holds now (this node's); undefined when it cannot say (its thread did not answer). */
  circuits(): Promise<readonly HeldCircuit[] | undefined>;
  /** Whether processing runs now (`/readyz` answers not ready otherwise). */
  running(): boolean;
  /** Finishes in-flight work and stops every stage (the store stays open). */
  stop(): Promise<void>;
}

export interface BackgroundStageDeps {
  readonly store: Store;
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Already started: the stages read destinations and suppressions from them. */
  readonly directory: SourceDirectory;
  readonly suppressions: SuppressionList;
  readonly now: () => number;
  /** This thread's tracing (NO_TRACING when off); the caller shuts it down. */
  readonly tracing: Tracing;
}

/** The delivery worker's settings, out of the server's. */
export function deliverySettings(config: Config): DeliverySettings {
  const { deliveryTimeoutMs, retryWindowMs, retryBaseMs, retryMaxDelayMs, userAgent, allowPrivateReceivers } = config;
  return { deliveryTimeoutMs, retryWindowMs, retryBaseMs, retryMaxDelayMs, userAgent, allowPrivateReceivers };
}

/**
 * Builds and starts the stages that run after the 200: processing raw
 * requests into messages, delivery, deletion steps, replays, Engage (profiles, computed traits, audiences) and the pruner. Each works only from the store, so it can
 * run on the main thread (`--workers 0`) or in the stage thread with its own
 * connection, and a crash of it loses nothing.
 */
export async function startBackgroundStages(deps: BackgroundStageDeps): Promise<BackgroundStages> {
  const { store, config, logger, metrics, directory, suppressions, now, tracing } = deps;
  const onError = (error: unknown): void => logger.error({ err: error }, 'background task failed');

  const delivery = new DeliveryWorker({
    store,
    destination: (sourceId) => directory.webhooks(sourceId),
    functions: {
      destination: (functionId) => directory.functionDestination(functionId),
      filters: (sourceId) => directory.webhookFilters(sourceId),
      code: async (functionId, version) => (await store.getFunctionCode(functionId, version))?.code,
      limits: sandboxLimits(config.sandbox),
      concurrency: config.functionConcurrency,
    },
    settings: deliverySettings(config),
    logger,
    metrics,
    tracing,
  });
  const regulations = new RegulationRunner({ store, now, newMessageId, pollMs: REGULATION_POLL_MS, onError });
  // Deletion steps wait until every raw request received before them is
  // processed; catching up wakes them (only when one waits).
  const processor = new RawProcessor({
    store,
    directory,
    suppressions,
    metrics,
    now,
    newMessageId,
    pollMs: PROCESSING_POLL_MS,
    gatherMs: PROCESSING_GATHER_MS,
    onError,
    onCaughtUp: () => regulations.rawRequestsCaughtUp(),
    tracing,
  });
  const replays = new ReplayRunner({ store, directory, suppressions, now, pollMs: REPLAY_POLL_MS, onError });
  const engage = new EngageRunner({ store, now, newMessageId, pollMs: ENGAGE_POLL_MS, onError, tracing });
  const transforms = new TransformStage({ store, directory, metrics, limits: sandboxLimits(config.sandbox), now, pollMs: TRANSFORM_POLL_MS, onError, tracing });
  // Every stage has the same start / stop / wake shape.
  const runners = [processor, regulations, replays, engage, transforms];

  const pruner = setInterval(() => {
    const at = now();
    store.prune(at - config.retentionMs, at - DEDUPLICATION_WINDOW_MS).catch(onError);
    // The observed schema keeps its own 30 days; violation counts go with the messages.
    store.pruneObservations(at - OBSERVED_BOUNDS.retentionDays * DAY_MS, at - config.retentionMs).catch(onError);
  }, PRUNE_EVERY_MS);
  pruner.unref();

  // The SQLite store de-duplicates with an index in memory, built here, on
  // the connection that stores the messages (the processing stage's).
  const preparing = Date.now();
  await store.prepareIngest(now() - DEDUPLICATION_WINDOW_MS);
  if (Date.now() - preparing > 1_000) logger.info({ ms: Date.now() - preparing }, 'processing prepared (de-duplication index loaded)');
  await delivery.start();
  for (const runner of runners) runner.start();
  let stopped = false;

  return {
    wakeRegulations: () => regulations.wake(),
    wakeReplays: () => replays.wake(),
    engageDefinitionsChanged: () => engage.definitionsChanged(),
    circuits: () => Promise.resolve(delivery.circuits()),
    running: () => !stopped,
    async stop() {
      stopped = true;
      clearInterval(pruner);
      await delivery.stop();
      for (const runner of runners) await runner.stop();
    },
  };
}
