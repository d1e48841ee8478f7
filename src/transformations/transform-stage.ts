import type { Metrics } from '../metrics.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { ChangeFeed, TransformationStore, TransformationVersionRecord, TransformingDelivery, TransformResult } from '../store/store.js';
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
}

/** Deliveries taken per pass and stored in one commit. */
const BATCH = 100;

/**
 * The transform stage: takes the deliveries processing created
 * `transforming` (their destination has a transformation), oldest first,
 * runs the transformation attached now on each message in the sandbox —
 * outside any store transaction, so user code (up to its time limit) never
 * holds the SQLite write lock — and stores what came of each batch in one
 * commit (`finishTransforms`): the output body on the delivery (a split: more
 * deliveries, in order), or the message `filtered`/`failed` with the reason.
 * Runs one message at a time, so a source's messages keep their order.
 */
export class TransformStage {
  private readonly loop: PassLoop;
  private readonly runner: TransformationRunner;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: TransformStageOptions) {
    this.runner = new TransformationRunner(options.limits);
    this.loop = new PassLoop(() => this.drain(), options.pollMs, options.onError);
  }

  start(): void {
    this.unsubscribe = this.options.store.subscribe((topic) => {
      if (topic === 'deliveries') this.loop.wake();
    });
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.loop.stop();
    this.runner.dispose();
  }

  /** Heap in use by the live isolates (bytes). */
  heapBytes(): number {
    return this.runner.pool.heapBytes();
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.loop.isStopped) return;
      const waiting = await this.options.store.listTransformingDeliveries(BATCH);
      if (waiting.length === 0) return;
      // Versions read once per batch: "the latest" is the store's, which every node reads alike.
      const versions = new Map<string, Promise<TransformationVersionRecord | undefined>>();
      const results: TransformResult[] = [];
      for (const delivery of waiting) results.push(await this.transform(delivery, versions));
      await this.options.store.finishTransforms(results);
      if (waiting.length < BATCH) return;
    }
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
      return { ...base, at: now(), info: undefined, kind: 'failed', reason: `transformation ${JSON.stringify(ref.id)}${ref.version === undefined ? '' : ` v${ref.version}`} no longer exists` };
    }
    const source = directory.byId(delivery.sourceId);
    const run = await this.runner.run(version, delivery.body, { sourceId: delivery.sourceId, sourceName: source?.name ?? '', messageId: delivery.messageId });
    const label = `transformation "${version.name}" v${version.version}`;
    const info = { id: version.id, name: version.name, version: version.version, logs: run.logs };
    metrics.transformSeconds.observe({ transformation: version.id }, run.durationMs / 1000);
    const outcome = run.outcome.kind === 'error' ? (run.fault ?? 'error') : run.outcome.kind;
    metrics.transformRuns.inc({ transformation: version.id, outcome });
    const at = now();
    switch (run.outcome.kind) {
      case 'output':
        return { ...base, at, info, kind: 'output', bodies: run.outcome.bodies };
      case 'dropped':
        return { ...base, at, info, kind: 'dropped', reason: `${label} dropped it` };
      case 'error':
        return { ...base, at, info, kind: 'failed', reason: `${label}: ${run.outcome.error}`.slice(0, 2000) };
    }
  }
}
