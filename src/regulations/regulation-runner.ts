import { deleteMessageBody } from '../domain/regulation.js';
import { type DeliveryTarget, functionTarget } from '../domain/routing.js';
import type { ConfigStore, FunctionStore, IngestEntry, IngestStore, RegulationDetail, RegulationStepKey, RegulationStore } from '../store/store.js';
import { PassLoop } from '../util/pass-loop.js';

export interface RegulationRunnerOptions {
  /** The steps, and the destination each erased source's `delete` messages go to. */
  readonly store: RegulationStore & Pick<ConfigStore, 'getDestination'> & Pick<FunctionStore, 'listFunctionDestinations'> & Pick<IngestStore, 'hasRawRequestsUpTo'>;
  readonly now: () => number;
  readonly newMessageId: () => string;
  /** How often to look for steps left by a restart or created on another node. */
  readonly pollMs: number;
  readonly onError: (error: unknown) => void;
}

/** Pending steps read per query. */
const STEPS_PER_QUERY = 20;
/** A step that fails this many times in a row is marked FAILED with its last error. */
const MAX_TRIES = 3;

/**
 * Runs the steps of deletion requests in the background: for each request
 * and affected source, one store transaction erases the subjects' messages
 * there and stores one `delete` message per subject, delivered through the
 * normal queue to the source's Webhooks destination when it is enabled.
 *
 * Works from the store's `PENDING` rows only, so a restart resumes whatever
 * was left, and several nodes may run at once: the store lets exactly one of
 * them run each step (the others' calls resolve false).
 */
export class RegulationRunner {
  private readonly loop: PassLoop;
  /** Failed tries per step, by "regulationId source id"; a step that runs is forgotten. */
  private readonly failures = new Map<string, number>();
  /**
   * Whether the last pass left a step waiting for raw requests to be
   * processed (or ended in an error before it could tell): only then does
   * the processing stage's catching up wake the runner.
   */
  private waitingForRaw = false;

  constructor(private readonly options: RegulationRunnerOptions) {
    this.loop = new PassLoop(() => this.pass(), options.pollMs, options.onError);
  }

  start(): void {
    this.loop.start();
  }

  /** Looks for pending steps now (a request was just created), or once more after the current pass. */
  wake(): void {
    this.loop.wake();
  }

  /**
   * The processing stage caught up with the raw requests: wakes the runner
   * when a step waits for them, or when a pass is under way (it may be
   * finding one waiting right now: the wake makes it look once more). It
   * runs each time processing catches up, so it must cost nothing otherwise.
   */
  rawRequestsCaughtUp(): void {
    if (this.waitingForRaw || this.loop.isRunning) this.loop.wake();
  }

  /** Stops polling and waits for the step under way, if any. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** Runs pending steps until none is left but those that failed in this pass (tried again at the next poll). */
  private async pass(): Promise<void> {
    // Steps of requests that wait for raw requests to be processed; the processing stage wakes the runner when it catches up.
    const waiting = new Set<string>();
    try {
      await this.runPendingSteps(waiting);
      this.waitingForRaw = waiting.size > 0;
    } catch (error) {
      this.waitingForRaw = true;
      throw error;
    }
  }

  private async runPendingSteps(waiting: Set<string>): Promise<void> {
    const { store } = this.options;
    const failedNow = new Set<string>();
    const regulations = new Map<string, RegulationDetail | undefined>();
    for (;;) {
      const steps = (await store.listPendingRegulationSteps(STEPS_PER_QUERY + failedNow.size + waiting.size)).filter(
        (s) => !failedNow.has(keyOf(s)) && !waiting.has(keyOf(s)),
      );
      if (steps.length === 0) return;
      for (const step of steps) {
        if (this.loop.isStopped) return;
        if (!regulations.has(step.regulationId)) regulations.set(step.regulationId, await store.getRegulation(step.regulationId));
        const regulation = regulations.get(step.regulationId);
        // A deletion erases what was acknowledged before it was, including
        // raw requests not yet processed into messages: it runs once they
        // are. By seq, never by time: on PostgreSQL a raw row's receivedAt
        // and the request's createdAt come from different nodes' clocks.
        if (regulation !== undefined && (await store.hasRawRequestsUpTo(regulation.rawSeqMark))) {
          waiting.add(keyOf(step));
          continue;
        }
        try {
          await this.runStep(step, regulation);
          this.failures.delete(keyOf(step));
        } catch (error) {
          failedNow.add(keyOf(step));
          await this.recordFailure(step, error);
        }
      }
    }
  }

  private async runStep(step: RegulationStepKey, regulation: RegulationDetail | undefined): Promise<void> {
    if (regulation === undefined) throw new Error(`regulation ${step.regulationId} is gone`);
    const { store, now, newMessageId } = this.options;
    const at = now();
    // The delete messages go out through the normal delivery queue, so a
    // receiver that is down gets them later like any other message.
    // They go to the source's enabled Webhooks destination and to each of its
    // enabled function destinations (their `onDelete`): a delete message has
    // no `integrations` and is not filtered.
    const [webhooks, functions] = await Promise.all([store.getDestination(step.sourceId, 'webhooks'), store.listFunctionDestinations(step.sourceId)]);
    const destinations: DeliveryTarget[] = [...(webhooks?.enabled === true ? ['webhooks' as const] : []), ...functions.filter((f) => f.enabled).map((f) => functionTarget(f.id))];
    const messages: IngestEntry[] =
      destinations.length > 0 ? regulation.subjectIds.map((userId) => deleteEntry(step.sourceId, userId, newMessageId(), at, destinations)) : [];
    await store.runRegulationStep({ ...step, eraseUserIds: regulation.subjectIds, messages, at });
  }

  private async recordFailure(step: RegulationStepKey, error: unknown): Promise<void> {
    const key = keyOf(step);
    const tries = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, tries);
    this.options.onError(new Error(`regulation ${step.regulationId} on source ${step.sourceId}: try ${tries} of ${MAX_TRIES} failed`, { cause: error }));
    if (tries < MAX_TRIES) return;
    this.failures.delete(key);
    const message = error instanceof Error ? error.message : String(error);
    try {
      await this.options.store.failRegulationStep(step, message.slice(0, 1_000), this.options.now());
    } catch (failError) {
      this.options.onError(failError);
    }
  }
}

function keyOf(step: RegulationStepKey): string {
  return `${step.regulationId} ${step.sourceId}`;
}

function deleteEntry(sourceId: string, userId: string, messageId: string, at: number, destinations: readonly DeliveryTarget[]): IngestEntry {
  return {
    sourceId,
    status: 'accepted',
    type: 'delete',
    messageId,
    userId,
    receivedAt: at,
    body: deleteMessageBody(userId, messageId, at),
    destinations,
  };
}
