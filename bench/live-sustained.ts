/**
 * `ingest.live.sustained`: `ingest.live` (same receiver in its own process,
 * same bare relay, same signed Webhooks destination, unpinned the same way)
 * as three 8 s rounds back to back, each round starting while the previous
 * one's deliveries still drain. One round of `ingest.live` measures ingest
 * beside the stage thread at its steadiest; these rounds measure it while
 * processing and delivery catch up on a backlog, the way a busy source
 * meets it, and judge the tail (p99) round by round against the relay's
 * round of the same number.
 */
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { runLoad, type LoadResult } from './lib/http-load.js';
import { readProcessing } from './lib/processing-backlog.js';
import { mainThreadRunQueueSeconds } from './lib/proc-stats.js';
import { waitForQuiet } from './lib/wait-for-quiet.js';
import { loopMaxMs, receivedBy, round, serversGetTwoCpus, stageThreadWorkers, startSide, waitDelivered } from './live.js';

const ROUNDS = 3;
const ROUND_SEC = 8;

interface RoundResult {
  readonly load: LoadResult;
  readonly acknowledged: number;
  /** Messages acknowledged before this round (warm-up excluded: it was drained) that the receiver had not yet received when it started. */
  readonly undeliveredAtStart: number;
  /** Acknowledged messages not yet processed into messages when it started (Switchyard only). */
  readonly unprocessedAtStart?: number | undefined;
  /** Longest event-loop delay of the ingest thread during the round (Switchyard only). */
  readonly ingestLoopMaxBlockMs?: number | undefined;
  /**
   * The server's main thread (the one that answers: the relay's only one,
   * Switchyard's ingest thread) runnable but waiting for a CPU, ms per
   * second of the round: what the scheduler, not the server's own work,
   * added to its latencies.
   */
  readonly mainThreadRunQueueMsPerSec?: number | undefined;
}

interface SustainedSide {
  readonly label: string;
  readonly rounds: readonly RoundResult[];
  /** From the end of the last round to the last acknowledged message at the receiver. */
  readonly deliveryLagMs: number;
  readonly allDelivered: boolean;
}

async function measureSustained(context: BenchContext, label: string, workers: string | undefined): Promise<SustainedSide> {
  const { options } = context;
  if (options.quietWaitSec > 0) {
    const { waitedSec, quiet } = await waitForQuiet(options.quietWaitSec);
    if (!quiet) context.log(`${label}: the machine is still busy after ${waitedSec} s; measuring anyway`);
  }
  const { receiver, server, spec, stop } = await startSide(context, label, workers);
  try {
    context.log(`${label}: warm-up ${options.warmupSec}s`);
    const warm = await runLoad({ ...spec, durationSec: Math.max(1, options.warmupSec) });
    await waitDelivered(receiver, warm.requests - warm.non2xx);
    const before = await receivedBy(receiver);
    const rounds: RoundResult[] = [];
    let acknowledgedSoFar = 0;
    for (let index = 0; index < ROUNDS; index++) {
      // Within the connection count: wrk does not count the responses of requests in flight when a phase ends, the receiver gets their messages all the same.
      const undeliveredAtStart = Math.max(0, acknowledgedSoFar - ((await receivedBy(receiver)) - before));
      const unprocessedAtStart = workers === undefined ? undefined : (await readProcessing(server))?.unprocessed;
      // Scraping /metrics resets the loop's maximum: what the next scrape reads is this round's.
      if (workers !== undefined) await loopMaxMs(server);
      const runQueueBefore = mainThreadRunQueueSeconds(server.pid);
      const started = performance.now();
      const load = await runLoad({ ...spec, durationSec: ROUND_SEC });
      const runQueueAfter = mainThreadRunQueueSeconds(server.pid);
      const mainThreadRunQueueMsPerSec =
        runQueueBefore === undefined || runQueueAfter === undefined ? undefined : ((runQueueAfter - runQueueBefore) * 1000) / ((performance.now() - started) / 1000);
      const ingestLoopMaxBlockMs = workers === undefined ? undefined : await loopMaxMs(server);
      const acknowledged = load.requests - load.non2xx;
      acknowledgedSoFar += acknowledged;
      rounds.push({ load, acknowledged, undeliveredAtStart, unprocessedAtStart, ingestLoopMaxBlockMs, mainThreadRunQueueMsPerSec });
      context.log(`${label} round ${index + 1}: ${load.requestsPerSec.toFixed(0)} req/s, p99 ${load.p99Ms.toFixed(1)} ms, max ${load.maxMs.toFixed(0)} ms, ` +
        `${undeliveredAtStart} undelivered at the start${unprocessedAtStart === undefined ? '' : ` (${unprocessedAtStart} unprocessed)`}` +
        `${ingestLoopMaxBlockMs === undefined ? '' : `, ingest loop max ${ingestLoopMaxBlockMs.toFixed(1)} ms`}` +
        `${mainThreadRunQueueMsPerSec === undefined ? '' : `, main thread waited for a CPU ${mainThreadRunQueueMsPerSec.toFixed(0)} ms/s`}`);
    }
    const loadEnd = Date.now();
    const allDelivered = await waitDelivered(receiver, before + acknowledgedSoFar);
    const deliveryLagMs = Date.now() - loadEnd;
    const failure = server.failure();
    if (failure !== undefined) throw new Error(`${label}: ${failure}`);
    return { label, rounds, deliveryLagMs, allDelivered };
  } finally {
    await stop();
  }
}

function roundSummary(result: RoundResult): Record<string, unknown> {
  return {
    requestsPerSec: round(result.load.requestsPerSec, 0),
    p99Ms: round(result.load.p99Ms, 1),
    maxMs: round(result.load.maxMs, 1),
    acknowledged: result.acknowledged,
    non2xx: result.load.non2xx,
    undeliveredAtStart: result.undeliveredAtStart,
    ...(result.unprocessedAtStart === undefined ? {} : { unprocessedAtStart: result.unprocessedAtStart }),
    ...(result.ingestLoopMaxBlockMs === undefined ? {} : { ingestLoopMaxBlockMs: round(result.ingestLoopMaxBlockMs, 1) }),
    ...(result.mainThreadRunQueueMsPerSec === undefined ? {} : { mainThreadRunQueueMsPerSec: round(result.mainThreadRunQueueMsPerSec, 0) }),
  };
}

export const sustainedLiveBenches: readonly BenchDefinition[] = [
  {
    name: 'ingest.live.sustained',
    async run(pinnedContext): Promise<BenchReport> {
      const context = serversGetTwoCpus(pinnedContext);
      const relay = await measureSustained(context, 'bare relay', undefined);
      const threaded = await measureSustained(context, 'switchyard (stage thread)', stageThreadWorkers());
      const perRound = threaded.rounds.map((side, index) => {
        const baseline = relay.rounds[index]!;
        return {
          round: index + 1,
          ratio: round(side.load.requestsPerSec / baseline.load.requestsPerSec, 3),
          p99VsRelay: round(side.load.p99Ms / baseline.load.p99Ms, 2),
          relay: roundSummary(baseline),
          switchyard: roundSummary(side),
        };
      });
      const worstRatio = Math.min(...perRound.map((entry) => entry.ratio));
      const worstP99VsRelay = Math.max(...perRound.map((entry) => entry.p99VsRelay));
      return {
        description: `ingest.live as ${ROUNDS} rounds of ${ROUND_SEC} s back to back (each starting while the previous one's deliveries drain), judged round by round against the relay's round of the same number`,
        metric: 'requests/s (the worst round)',
        ratio: worstRatio,
        target: 0.6,
        pass: worstRatio >= 0.6 && worstP99VsRelay <= 2 && threaded.allDelivered,
        loadGenerator: relay.rounds[0]?.load.generator,
        cpus: context.cpus.pinned
          ? `pinned: relay and Switchyard (both threads) on CPU(s) ${context.cpus.server}, receiver and load generator on CPU(s) ${context.cpus.loadGenerator}`
          : `unpinned: every process shares ${context.cpus.available.length} CPU(s)`,
        worstP99VsRelay,
        p99Target: '≤ 2× the relay\'s in every round',
        // One key per round (not an array), so that the Markdown report lists every round's figures.
        ...Object.fromEntries(perRound.map(({ round: number, ...figures }) => [`round${number}`, figures])),
        relayDeliveryLagMs: relay.deliveryLagMs,
        switchyardDeliveryLagMs: threaded.deliveryLagMs,
        allDelivered: threaded.allDelivered,
      };
    },
  },
];
