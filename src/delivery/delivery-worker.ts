import { hostname } from 'node:os';
import { setMaxListeners } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { WebhookDestination } from '../domain/webhook-settings.js';
import type { Metrics } from '../metrics.js';
import type { ChangeFeed, ClaimedDelivery, DeliveryOutcome, DeliveryQueue } from '../store/store.js';
import { NO_TRACING, type Tracing } from '../telemetry/tracing.js';
import { randomToken } from '../util/crypto.js';
import { CircuitBreaker, type CircuitBreakerOptions } from './circuit-breaker.js';
import { type HeldCircuit, MAX_REPORTED_CIRCUITS, circuitKind } from '../domain/circuits.js';
import { type RoundContext, runRound } from './delivery-round.js';
import { OriginSlots, type OriginSlotsOptions } from './origin-slots.js';
import { ReceiverRates } from './receiver-rates.js';
import { OutcomeBatcher } from './outcome-batcher.js';
import { WebhookSender } from './webhook-sender.js';
import type { DestinationFilter } from '../domain/destination-filters.js';
import type { FunctionDestinationRecord } from '../store/store.js';
import { DEFAULT_FETCH_BOUNDS, FunctionFetcher } from '../functions/function-fetch.js';
import { FunctionRunner } from '../functions/function-runner.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';

/** What the worker needs of the server's settings (the wiring builds it from `Config`). */
export interface DeliverySettings {
  /** How long a receiver has to answer. */
  readonly deliveryTimeoutMs: number;
  /** How long failed deliveries are retried. */
  readonly retryWindowMs: number;
  /** Backoff start and cap. */
  readonly retryBaseMs: number;
  readonly retryMaxDelayMs: number;
  /** The `User-Agent` of deliveries. */
  readonly userAgent: string;
  /** Whether receivers on loopback and private addresses are allowed. */
  readonly allowPrivateReceivers: boolean;
}

/** What the worker needs to run function destinations. */
export interface WorkerFunctions {
  readonly destination: (functionId: string) => FunctionDestinationRecord | undefined;
  readonly filters: (sourceId: string) => readonly DestinationFilter[];
  readonly code: (functionId: string, version: number) => Promise<string | undefined>;
  readonly limits: SandboxLimits;
  /** Calls of one function destination in flight at once (they share its isolate); 1 when absent. */
  readonly concurrency?: number;
}

/** How hard the worker works; defaults in {@link defaultWorkerLimits}. */
export interface WorkerLimits {
  /** Deliveries in flight at once. */
  readonly maxInFlight: number;
  /** Requests one origin may have in flight. */
  readonly perOrigin: number;
  /** How long a request waits in memory for a slot of its origin before its delivery is deferred. */
  readonly slotWaitMs: number;
  /** How long a claim holds a delivery; must outlast one round. */
  readonly leaseMs: number;
  /** Longest sleep between looks at the queue (changes by the CLI or other nodes show within it). */
  readonly maxIdleMs: number;
  /** How long `stop` waits for POSTs in flight before cutting them off. */
  readonly stopWaitMs: number;
  readonly breaker: CircuitBreakerOptions;
}

export interface DeliveryWorkerOptions {
  /** The queue, and its `deliveries` notifications (the worker wakes on them). */
  readonly store: DeliveryQueue & ChangeFeed;
  /** The current Webhooks destination of a source, settings parsed (the SourceDirectory's view). */
  readonly destination: (sourceId: string) => WebhookDestination | undefined;
  readonly settings: DeliverySettings;
  /** Function destinations (the SourceDirectory's view and the store's code); undefined: their deliveries fail, saying so. */
  readonly functions?: WorkerFunctions | undefined;
  readonly logger: Logger;
  readonly metrics?: Metrics | undefined;
  readonly limits?: Partial<WorkerLimits> | undefined;
  readonly now?: () => number;
  readonly random?: () => number;
  /** Spans of delivery attempts; off when undefined. */
  readonly tracing?: Tracing | undefined;
}

/**
 * Lease: a round lasts at most the wait for an origin slot (1 s) plus the
 * delivery timeout (the POSTs run in parallel, each bounded from start to
 * end), plus a few milliseconds to record it; 30 s on top covers the slot
 * wait, pauses and a slow disk. A crashed worker's
 * jobs fall due when it expires, or at once on a single-node restart (see
 * `Store.releaseLeases`).
 *
 * Breaker: 5 retriable failures in a row open a receiver's circuit for 5 s,
 * doubling after each failed probe up to 1 min. Never longer than the retry
 * delay cap, though: the breaker exists to spare receivers, not to hold
 * messages back longer than the retry policy itself would.
 */
export function defaultWorkerLimits(settings: DeliverySettings): WorkerLimits {
  return {
    maxInFlight: 256,
    perOrigin: 64,
    slotWaitMs: 1_000,
    leaseMs: settings.deliveryTimeoutMs + 30_000,
    maxIdleMs: 1_000,
    stopWaitMs: Math.min(settings.deliveryTimeoutMs + 500, 10_000),
    breaker: {
      failureThreshold: 5,
      openMs: Math.min(5_000, settings.retryMaxDelayMs),
      maxOpenMs: Math.min(60_000, settings.retryMaxDelayMs),
      probeHoldMs: 1_000,
      probeTimeoutMs: settings.deliveryTimeoutMs + 5_000,
    },
  };
}

/**
 * How long a delivery may queue for a slow origin's slot (by its pace)
 * before it is deferred instead. A fast receiver's queue never gets this
 * long within the worker's in-flight limit (256 deliveries at 64 slots and
 * 5 ms an answer are 20 ms); a slow one's does, and deferring its excess lets
 * other sources' deliveries through.
 */
const MAX_SLOT_QUEUE_MS = 100;
/**
 * Outcomes are written in batches of up to OUTCOME_BATCH, at most
 * OUTCOME_DELAY_MS after the first one. Fewer, larger commits cost less per
 * delivery (measured on SQLite at 10k deliveries/s: about 1 µs of CPU less
 * per delivery from 5 ms to 10 ms, and fewer WAL pages to write and
 * checkpoint); the delay only postpones the record, never a POST.
 */
const OUTCOME_BATCH = 256;
/**
 * Longest wait in memory for a capped receiver's send time. A second: a cap's
 * whole window, so a full second of the cap's sends is always lined up and the
 * receiver gets its rate, while a backlog beyond it waits in the store.
 */
const RATE_WAIT_MS = 1_000;
const OUTCOME_DELAY_MS = 10;
/**
 * Share of the in-flight limit that must be free before a full worker claims
 * again, so claims come in batches: half of 256 is 128 a claim, still twice
 * the slots of one receiver, so a single busy receiver never runs dry.
 */
const CLAIM_BATCH_SHARE = 0.5;
/** How long `stop` waits for rounds after cutting off their POSTs. */
const STOP_GRACE_MS = 2_000;

/**
 * The delivery loop: claims due deliveries with a lease, runs their rounds
 * concurrently (bounded), and records outcomes in batches. Wakes on the
 * store's `deliveries` events, on its own retries falling due, and otherwise
 * at least every `maxIdleMs`.
 */
export class DeliveryWorker {
  readonly owner = `${hostname()}:${process.pid}:${randomToken(6)}`;
  private readonly limits: WorkerLimits;
  private readonly claimAtLeast: number;
  private readonly now: () => number;
  private readonly sender: WebhookSender;
  private readonly functionRunner: FunctionRunner | undefined;
  private readonly functionFetcher: FunctionFetcher | undefined;
  private readonly unwatchHeaps: (() => void) | undefined;
  private readonly unwatchCircuits: (() => void) | undefined;
  private readonly breaker: CircuitBreaker;
  private readonly batcher: OutcomeBatcher;
  private readonly round: RoundContext;
  private readonly stopController = new AbortController();
  private running = false;
  private inFlight = 0;
  private pokeRequested = false;
  /** The earliest retry recorded since the loop last read the queue, for when it goes to sleep. */
  private dueHint = Infinity;
  /** The loop's current sleep; `forSlots` when it waits for rounds to finish rather than for work to fall due. */
  private sleeping: { until: number; timer: NodeJS.Timeout; wake: () => void; forSlots: boolean } | undefined;
  private loopDone: Promise<void> | undefined;
  private idle: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: DeliveryWorkerOptions) {
    const { settings } = options;
    const defaults = defaultWorkerLimits(settings);
    this.limits = { ...defaults, ...options.limits, breaker: { ...defaults.breaker, ...options.limits?.breaker } };
    this.claimAtLeast = Math.max(1, Math.floor(this.limits.maxInFlight * CLAIM_BATCH_SHARE));
    this.now = options.now ?? Date.now;
    // Every waiter for an origin's slot listens for the stop, so there are
    // routinely hundreds: not the leak Node's warning past 10 is there to catch.
    setMaxListeners(0, this.stopController.signal);
    this.sender = new WebhookSender({
      timeoutMs: settings.deliveryTimeoutMs,
      stop: this.stopController.signal,
      allowPrivateReceivers: settings.allowPrivateReceivers,
      connectionsPerOrigin: this.limits.perOrigin,
      now: this.now,
    });
    // A held delivery waits in proportion to the origin's pace and to how
    // many were turned away before it, which spreads a long backlog over the
    // time the receiver needs to work it off. Capped like a retry: with a
    // cap of one delivery timeout, a backlog of a million came due again
    // every few seconds and was claimed and deferred over and over, keeping
    // other sources' messages behind it (measured: 16 s late, CPU near 90%;
    // with this cap, 0.01-0.15 s once the backlog had been spread).
    const maxHoldMs = Math.max(settings.retryMaxDelayMs, 1_000);
    const slotOptions: OriginSlotsOptions = { perOrigin: this.limits.perOrigin, waitMs: this.limits.slotWaitMs, maxQueueMs: MAX_SLOT_QUEUE_MS, maxHoldMs };
    this.batcher = new OutcomeBatcher(options.store, {
      maxBatch: OUTCOME_BATCH,
      maxDelayMs: OUTCOME_DELAY_MS,
      onFlushed: (outcomes, released) => this.noteDue(outcomes, released),
      onError: (error) => options.logger.error({ err: error }, 'recording delivery outcomes failed'),
    });
    const metrics = options.metrics;
    const threshold = this.limits.breaker.failureThreshold;
    // Opening is rare (a receiver or function failing `threshold` times in a row): worth a line each time.
    const breaker = new CircuitBreaker(this.limits.breaker, (key) => {
      options.logger.warn({ target: key }, `circuit opened after ${threshold} failures in a row: deliveries to it are held, then one is sent as a probe`);
      metrics?.circuitsOpened.inc({ kind: circuitKind(key) });
    });
    this.breaker = breaker;
    this.unwatchCircuits = metrics?.watchCircuits(() => breaker.heldCounts());
    const rates = new ReceiverRates(RATE_WAIT_MS);
    const fns = options.functions;
    const functionConcurrency = Math.max(1, fns?.concurrency ?? 1);
    if (fns !== undefined) {
      this.functionFetcher = new FunctionFetcher({
        timeoutMs: settings.deliveryTimeoutMs,
        allowPrivateReceivers: settings.allowPrivateReceivers,
        userAgent: settings.userAgent,
        // A function's calls in flight may all fetch from one API at once.
        connectionsPerOrigin: Math.max(16, functionConcurrency),
        ...DEFAULT_FETCH_BOUNDS,
      });
      const runner = new FunctionRunner(fns.limits, this.functionFetcher, undefined, functionConcurrency);
      this.functionRunner = runner;
      this.unwatchHeaps = options.metrics?.watchSandboxHeaps(async () => (await runner.pool.heapById()).map((heap) => ({ kind: 'function', ...heap })));
    }
    this.round = {
      owner: this.owner,
      userAgent: settings.userAgent,
      policy: { baseMs: settings.retryBaseMs, maxDelayMs: settings.retryMaxDelayMs, windowMs: settings.retryWindowMs },
      destination: (sourceId) => options.destination(sourceId),
      sender: this.sender,
      breaker,
      slots: new OriginSlots(slotOptions),
      rates,
      now: this.now,
      random: options.random ?? Math.random,
      stop: this.stopController.signal,
      onPost: (result) => options.metrics?.deliveryAttempts.inc({ outcome: result.metric }),
      tracing: options.tracing ?? NO_TRACING,
      functions:
        fns === undefined || this.functionRunner === undefined
          ? undefined
          : {
              owner: this.owner,
              policy: { baseMs: settings.retryBaseMs, maxDelayMs: settings.retryMaxDelayMs, windowMs: settings.retryWindowMs },
              destination: fns.destination,
              filters: fns.filters,
              code: fns.code,
              runner: this.functionRunner,
              breaker,
              // A function's isolate runs `functionConcurrency` calls at once:
              // as many slots, so its backlog waits in the store, not in
              // memory, and never holds the worker's slots from other
              // destinations.
              slots: new OriginSlots({ ...slotOptions, perOrigin: functionConcurrency }),
              rates,
              now: this.now,
              random: options.random ?? Math.random,
              stop: this.stopController.signal,
              onCall: (result) => options.metrics?.deliveryAttempts.inc({ outcome: `function-${result.outcome}` }),
            },
    };
  }

  async start(): Promise<void> {
    if (this.running) return;
    const released = await this.options.store.releaseLeases(this.owner, this.now());
    if (released > 0) this.options.logger.info({ released }, 'resuming deliveries a previous run had in flight');
    this.unsubscribe = this.options.store.subscribe((topic) => {
      if (topic === 'deliveries') this.poke();
    });
    this.running = true;
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, waits up to `stopWaitMs` for rounds in flight, cuts off
   * the rest (they are deferred to "now" and resume on the next start), and
   * records every outcome before resolving.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unsubscribe?.();
    this.poke();
    await this.loopDone;
    if (this.inFlight > 0) {
      const drained = new Promise<void>((resolve) => (this.idle = resolve));
      let giveUp: NodeJS.Timeout | undefined;
      const cutOff = setTimeout(() => {
        this.stopController.abort();
        // Cut-off POSTs end at once; the bound is only against a round that never does.
        giveUp = setTimeout(() => this.idle?.(), STOP_GRACE_MS);
      }, this.limits.stopWaitMs);
      await drained;
      clearTimeout(cutOff);
      clearTimeout(giveUp);
    }
    await this.batcher.flush();
    await this.sender.destroy();
    this.unwatchHeaps?.();
    this.unwatchCircuits?.();
    this.functionRunner?.dispose();
    await this.functionFetcher?.destroy();
  }

  /** The circuits this worker's breaker holds now (this node's view; each node has its own breakers). */
  circuits(): HeldCircuit[] {
    return this.breaker.held(MAX_REPORTED_CIRCUITS);
  }

  private async loop(): Promise<void> {
    while (this.running) {
      // Every claim starts on a new turn of the event loop. Rounds that end
      // without I/O (held by a circuit breaker or a slow origin's queue) settle
      // in microtasks and wake this loop in microtasks; without this yield, a
      // large backlog held that way was claimed and deferred in one endless
      // chain of microtasks that starved every socket, timer and signal.
      await nextTurn();
      this.pokeRequested = false;
      this.dueHint = Infinity;
      const free = this.limits.maxInFlight - this.inFlight;
      let full = free <= 0;
      if (!full) {
        try {
          const jobs = await this.options.store.claimDeliveries({ owner: this.owner, limit: free, leaseMs: this.limits.leaseMs, now: this.now() });
          for (const job of jobs) this.launch(job);
          full = jobs.length === free;
        } catch (error) {
          this.options.logger.error({ err: error }, 'claiming deliveries failed');
          await this.sleepUntil(this.now() + this.limits.maxIdleMs);
          continue;
        }
      }
      if (!this.running) break;
      if (full) {
        // More may be due: claim again once enough slots are free for a batch (launch's completions poke).
        if (this.limits.maxInFlight - this.inFlight >= this.claimAtLeast) continue;
        await this.sleepUntil(this.now() + this.limits.maxIdleMs, true);
        continue;
      }
      let until = this.now() + this.limits.maxIdleMs;
      try {
        const due = await this.options.store.nextDeliveryDueAt();
        if (due !== undefined) until = Math.min(until, Math.max(due, this.now() + 1));
      } catch (error) {
        this.options.logger.error({ err: error }, 'reading the delivery queue failed');
      }
      await this.sleepUntil(Math.min(until, Math.max(this.dueHint, this.now() + 1)));
    }
  }

  private launch(job: ClaimedDelivery): void {
    this.inFlight++;
    runRound(job, this.round)
      .then((outcome) => this.finish(job, outcome))
      .catch((error: unknown) => this.options.logger.error({ err: error, delivery: job.id }, 'delivery round failed'))
      .finally(() => {
        this.inFlight--;
        const free = this.limits.maxInFlight - this.inFlight;
        if (this.sleeping?.forSlots === true && free >= this.claimAtLeast) this.poke();
        if (this.inFlight === 0) this.idle?.();
      });
  }

  private finish(job: ClaimedDelivery, outcome: DeliveryOutcome): void {
    this.batcher.add(outcome);
    const metrics = this.options.metrics;
    if (metrics === undefined) return;
    if (outcome.kind === 'succeeded' || outcome.kind === 'failed') metrics.deliveriesFinished.inc({ status: outcome.kind });
    if (outcome.kind === 'succeeded') metrics.deliveryLagSeconds.observe(Math.max(0, outcome.at - job.createdAt) / 1000);
  }

  /** Once outcomes are recorded, their retries may fall due before the loop would look again. */
  private noteDue(outcomes: readonly DeliveryOutcome[], released: number): void {
    // Deliveries that waited behind ones that ended are due now.
    let earliest = released > 0 ? this.now() : Infinity;
    for (const outcome of outcomes) {
      if (outcome.kind === 'retry' || outcome.kind === 'deferred') earliest = Math.min(earliest, outcome.nextAttemptAt);
    }
    const sleeping = this.sleeping;
    if (sleeping === undefined) {
      this.dueHint = Math.min(this.dueHint, earliest);
      return;
    }
    // A loop waiting for free slots claims when enough are free, not when
    // something falls due: woken early it claimed a handful at a time, each
    // claim a commit of its own (an ordered backlog releases successors with
    // every outcome batch).
    if (sleeping.forSlots || earliest >= sleeping.until) return;
    clearTimeout(sleeping.timer);
    sleeping.until = earliest;
    sleeping.timer = setTimeout(sleeping.wake, Math.max(0, earliest - this.now()));
  }

  private poke(): void {
    this.pokeRequested = true;
    this.sleeping?.wake();
  }

  private sleepUntil(until: number, forSlots = false): Promise<void> {
    if (this.pokeRequested || !this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        if (this.sleeping === undefined) return;
        clearTimeout(this.sleeping.timer);
        this.sleeping = undefined;
        resolve();
      };
      this.sleeping = { until, timer: setTimeout(wake, Math.max(0, until - this.now())), wake, forSlots };
    });
  }
}
