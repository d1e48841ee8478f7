import { type OrderPlace, deliveryScope, orderKeyOf } from '../domain/delivery-order.js';
import { withoutDroppedFields } from '../domain/destination-filters.js';
import type { Metrics } from '../metrics.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { ChangeFeed, TransformationStore, TransformationVersionRecord, TransformingDelivery, TransformResult } from '../store/store.js';
import type { Tracing } from '../telemetry/tracing.js';
import { PassLoop } from '../util/pass-loop.js';
import { TransformationRunner } from './transformation-runner.js';

export interface TransformStageOptions {
  readonly store: TransformationStore & ChangeFeed;
  readonly directory: SourceDirectory;
  readonly metrics: Metrics;
  readonly limits: SandboxLimits;
  readonly now: () => number;
  /** How often to look for waiting deliveries without a notification (other nodes', missed ones). */
  readonly pollMs: number;
  readonly onError: (error: unknown) => void;
  /** On: a span per run, child of the message's stored traceparent. */
  readonly tracing?: Tracing | undefined;
}

/** Deliveries listed per pass. */
const BATCH = 200;
/** Deliveries of one source per lane, stored in one commit. */
const LANE_BATCH = 50;
/** Sources transformed at once (isolated-vm runs each isolate's calls on its own pool thread). */
const MAX_LANES = 8;

/**
 * The transform stage: takes the deliveries processing created
 * `transforming` (their destination has a transformation), oldest first,
 * runs the transformation attached now on each message in the sandbox —
 * outside any store transaction, so user code (up to its time limit) never
 * holds the SQLite write lock — and stores what came of each batch in one
 * commit (`finishTransforms`): the output body on the delivery (a split: more
 * deliveries, in order), or the message `filtered`/`failed` with the reason.
 * Sources run side by side, each source's messages one at a time, in order.
 */
export class TransformStage {
  private readonly loop: PassLoop;
  private readonly runner: TransformationRunner;
  private unsubscribe: (() => void) | undefined;
  private readonly unwatchHeaps: () => void;
  /** The lane running per source. */
  private readonly lanes = new Map<string, Promise<void>>();

  constructor(private readonly options: TransformStageOptions) {
    this.runner = new TransformationRunner(options.limits);
    this.unwatchHeaps = options.metrics.watchSandboxHeaps(async () => (await this.runner.pool.heapById()).map((heap) => ({ kind: 'transformation', ...heap })));
    this.loop = new PassLoop(() => this.drain(), options.pollMs, options.onError);
  }

  start(): void {
    // New deliveries wait for a transformation only while one is attached
    // somewhere; without, the query per notification was 4% of the CPU at
    // 1,000 messages/s (delivery.latency). Any left from before (detached
    // since, or requeued) are found by the poll.
    this.unsubscribe = this.options.store.subscribe((topic) => {
      if (topic === 'deliveries' && this.options.directory.anyTransformations()) this.loop.wake();
    });
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.loop.stop();
    await Promise.all(this.lanes.values());
    this.unwatchHeaps();
    this.runner.dispose();
  }

  /**
   * Starts a lane per source with waiting deliveries (up to MAX_LANES): each
   * transforms its source's deliveries in order and commits them, while
   * other sources' lanes go on, so a transformation that loops or waits
   * delays only its own source's messages. A source's next lane starts only
   * after its last one committed (the listing skips busy sources): its
   * messages keep their order.
   */
  private async drain(): Promise<void> {
    if (this.loop.isStopped || this.lanes.size >= MAX_LANES) return;
    const waiting = await this.options.store.listTransformingDeliveries(BATCH, [...this.lanes.keys()]);
    const bySource = new Map<string, TransformingDelivery[]>();
    for (const delivery of waiting) {
      const list = bySource.get(delivery.sourceId);
      if (list === undefined) bySource.set(delivery.sourceId, [delivery]);
      else if (list.length < LANE_BATCH) list.push(delivery);
    }
    for (const [sourceId, deliveries] of bySource) {
      if (this.lanes.size >= MAX_LANES) break;
      const lane = this.runLane(deliveries)
        .catch(this.options.onError)
        .finally(() => {
          this.lanes.delete(sourceId);
          this.loop.wake();
        });
      this.lanes.set(sourceId, lane);
    }
  }

  private async runLane(deliveries: readonly TransformingDelivery[]): Promise<void> {
    // Versions read once per lane: "the latest" is the store's, which every node reads alike.
    const versions = new Map<string, Promise<TransformationVersionRecord | undefined>>();
    const results: TransformResult[] = [];
    for (const delivery of deliveries) {
      if (this.loop.isStopped) break;
      results.push(await this.transform(delivery, versions));
    }
    await this.options.store.finishTransforms(results);
  }

  private async transform(delivery: TransformingDelivery, versions: Map<string, Promise<TransformationVersionRecord | undefined>>): Promise<TransformResult> {
    const { directory, store, metrics, now } = this.options;
    const base = { deliveryId: delivery.id, messageSeq: delivery.messageSeq, replay: delivery.replay };
    const destination = directory.webhooks(delivery.sourceId);
    const ref = destination?.check.ok === true ? destination.check.settings.transformation : undefined;
    // Detached since, or the message is gone (the delivery worker reports that): deliver as it is.
    if (ref === undefined || delivery.body === null) return { ...base, at: now(), info: undefined, kind: 'unchanged' };
    const key = `${ref.id}@${ref.version ?? 'latest'}`;
    let lookup = versions.get(key);
    if (lookup === undefined) {
      lookup = store.getTransformationVersion(ref.id, ref.version);
      versions.set(key, lookup);
    }
    const version = await lookup;
    if (version === undefined) {
      const reason = `transformation ${JSON.stringify(ref.id)}${ref.version === undefined ? '' : ` v${ref.version}`} no longer exists`;
      return { ...base, at: now(), info: undefined, kind: 'failed', reason, order: orderOf(delivery) };
    }
    const source = directory.byId(delivery.sourceId);
    const span = this.options.tracing?.startSpan('transform', {
      parent: delivery.traceparent,
      attributes: {
        'switchyard.source.id': delivery.sourceId,
        'switchyard.delivery.id': delivery.id,
        'switchyard.transformation.id': version.id,
        'switchyard.transformation.version': version.version,
      },
    });
    // The transformation sees the message as the destination's filters leave
    // it: fields a `dropFields` filter removes (personal data, as a rule)
    // must not reach its code, its logs or its output.
    const filters = destination?.check.ok === true ? destination.check.settings.filters : undefined;
    const input = filters === undefined ? delivery.body : withoutDroppedFields(delivery.body, filters);
    const run = await this.runner.run(version, input, { sourceId: delivery.sourceId, sourceName: source?.name ?? '', messageId: delivery.messageId });
    if (span !== undefined) {
      span.setAttribute('switchyard.transformation.outcome', run.outcome.kind === 'error' ? (run.fault ?? 'error') : run.outcome.kind);
      if (run.outcome.kind === 'error') span.fail(run.outcome.error);
      span.end();
    }
    const label = `transformation "${version.name}" v${version.version}`;
    const info = { id: version.id, name: version.name, version: version.version, logs: run.logs };
    metrics.transformSeconds.observe({ transformation: version.id }, run.durationMs / 1000);
    const outcome = run.outcome.kind === 'error' ? (run.fault ?? 'error') : run.outcome.kind;
    metrics.transformRuns.inc({ transformation: version.id, outcome });
    const at = now();
    switch (run.outcome.kind) {
      case 'output':
        return { ...base, at, info, kind: 'output', bodies: run.outcome.bodies, ...(run.outcome.bodies.length > 1 && { order: orderOf(delivery) }) };
      case 'dropped':
        return { ...base, at, info, kind: 'dropped', reason: `${label} dropped it`, order: orderOf(delivery) };
      case 'error':
        return { ...base, at, info, kind: 'failed', reason: `${label}: ${run.outcome.error}`.slice(0, 2000), order: orderOf(delivery) };
    }
  }
}

/**
 * The (scope, key) an ordered delivery of this message is chained in, as
 * processing and replays key it (the stored body's userId, else its
 * anonymousId); read only for a drop, a failure or a split, which may move
 * the key's tail or check whether it names the delivery.
 */
function orderOf(delivery: TransformingDelivery): OrderPlace | undefined {
  const key = delivery.body === null ? undefined : orderKeyOf(JSON.parse(delivery.body) as unknown);
  return key === undefined ? undefined : { scope: deliveryScope(delivery.sourceId, delivery.replayId), key };
}
