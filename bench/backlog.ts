/**
 * backlog.1m (docs/targets.md, "Performance targets"): does a queue of a million
 * pending deliveries slow the worker down or blow up its memory?
 *
 * Same rig as delivery.throughput (lib/delivery-rig.ts). Three drains, each
 * Switchyard started afresh on a prefilled queue and measured over a window
 * after a warm-up, at the receiver:
 *   1. small: a fresh store with SMALL_JOBS pending;
 *   2. big:   the same store topped up with BIG_JOBS more (the small run's
 *             finished deliveries stay, as in a real queue);
 *   3. small again, on another fresh store, so that drift of a shared
 *      machine over the run lands on both sides.
 * ratio = big rate ÷ mean small rate. The big drain is stopped after its
 * window: nobody waits for a million deliveries.
 */
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { preciseNow } from './lib/delivery-protocol.js';
import { createRig, type DrainFigures, type DrainPlan, maybeWaitQuiet, measureDrain, type PrefillFigures, type Rig, round } from './lib/delivery-rig.js';

const BIG_JOBS = 1_000_000;
/**
 * "An (almost) empty queue": 5% of the big one. Not smaller, because the
 * worker drains several thousand a second: with 20,000 the window (from 25%
 * to 95% delivered) lasted under 2 s, too short to be more than noise on a
 * shared machine.
 */
const SMALL_JOBS = 50_000;
const RATIO_TARGET = 0.8;
const RSS_TARGET_MB = 300;

interface DrainRun extends DrainFigures {
  readonly phase: string;
  readonly pendingJobs: number;
  readonly serverPeakRssMb: number | undefined;
}

async function drain(context: BenchContext, rig: Rig, phase: string, pendingJobs: number, windowSec: number): Promise<DrainRun> {
  const { options } = context;
  const log = (message: string): void => context.log(message);
  // Both sizes: the window opens after the warm-up (or at 25% of the queue) and closes after `windowSec` (or at 95%).
  const plan: DrainPlan = {
    total: pendingJobs,
    startCount: Math.round(pendingJobs * 0.25),
    warmupSec: Math.max(1, options.warmupSec),
    endCount: Math.round(pendingJobs * 0.95),
    windowSec,
    timeoutSec: Math.max(1, options.warmupSec) + windowSec + 45,
  };
  await maybeWaitQuiet(context, 'backlog.1m');
  await rig.receiver.reset({ phase, marks: [1, plan.startCount, plan.endCount], latency: false });
  log(`backlog.1m: ${phase}: draining ${pendingJobs} pending jobs`);
  const launchedAt = preciseNow();
  const server = await rig.launch(`backlog.1m switchyard (${phase})`, phase === 'big');
  try {
    const figures = await measureDrain(rig.receiver, server, plan, launchedAt);
    log(`backlog.1m: ${phase}: ${figures.deliveriesPerSec} deliveries/s over ${figures.windowSec} s`);
    return { phase, ...figures, pendingJobs, serverPeakRssMb: server.peakRssMb() };
  } finally {
    await server.stop();
  }
}

async function prefill(context: BenchContext, rig: Rig, jobs: number): Promise<PrefillFigures> {
  let nextLog = 200_000;
  const figures = await rig.prefill(jobs, (done) => {
    if (done >= nextLog) {
      context.log(`backlog.1m: prefilled ${done} of ${jobs}`);
      nextLog += 200_000;
    }
  });
  context.log(`backlog.1m: prefilled ${jobs} jobs in ${figures.seconds} s (${figures.jobsPerSec}/s)`);
  return figures;
}

async function runBacklog(context: BenchContext): Promise<BenchReport> {
  const windowSec = 2 * context.options.durationSec;
  const smalls: DrainRun[] = [];
  let big: DrainRun;
  let bigPrefill: PrefillFigures;

  const first = (await createRig(context, 'backlog.1m small+big')).rig;
  try {
    await prefill(context, first, SMALL_JOBS);
    smalls.push(await drain(context, first, 'small-1', SMALL_JOBS, windowSec));
    bigPrefill = await prefill(context, first, BIG_JOBS);
    big = await drain(context, first, 'big', BIG_JOBS, windowSec);
  } finally {
    await first.close();
  }
  const second = (await createRig(context, 'backlog.1m small again')).rig;
  try {
    await prefill(context, second, SMALL_JOBS);
    smalls.push(await drain(context, second, 'small-2', SMALL_JOBS, windowSec));
  } finally {
    await second.close();
  }

  const smallRate = smalls.reduce((sum, run) => sum + run.deliveriesPerSec, 0) / smalls.length;
  const ratio = smallRate > 0 ? round(big.deliveriesPerSec / smallRate, 3) : 0;
  const rss = big.serverPeakRssMb;
  const rssOk = rss !== undefined && rss <= RSS_TARGET_MB;
  const notes: string[] = [];
  if (context.options.selfCheck) notes.push('--self-check does not apply here: Switchyard itself was measured.');
  if (big.windowEnd === 'timeout') notes.push('The big drain was cut short by its timeout: its rate covers what was measured.');
  if (smalls.some((run) => run.windowEnd === 'count' && run.windowSec < 3)) {
    notes.push('A small drain reached 95% within 3 s of its warm-up: its window is short and noisy.');
  }
  if (rss === undefined) notes.push('The server\'s RSS could not be read (/proc).');
  for (const run of [...smalls, big]) {
    if ((run.otherCpuPercent ?? 0) >= 30) {
      const who = context.options.store === 'postgres' ? 'Other processes, PostgreSQL among them,' : 'Other processes';
      notes.push(`${who} used ${run.otherCpuPercent}% CPU during the ${run.phase} window.`);
    }
  }
  return {
    description:
      `Drain rate with ${BIG_JOBS} pending deliveries against the rate with ${SMALL_JOBS} (before and after, on fresh stores), ` +
      `each over a window of up to ${windowSec} s after a warm-up, measured at a bare receiver; and the server's peak RSS with the big queue`,
    metric: 'deliveries/s (big queue ÷ small queue)',
    ratio,
    target: RATIO_TARGET,
    pass: ratio >= RATIO_TARGET && rssOk,
    rssTargetMb: RSS_TARGET_MB,
    serverPeakRssMb: rss,
    rssPass: rssOk,
    prefill: bigPrefill,
    big,
    small: { deliveriesPerSec: Math.round(smallRate), rounds: smalls },
    roundRatios: smalls.map((run) => (run.deliveriesPerSec > 0 ? round(big.deliveriesPerSec / run.deliveriesPerSec, 3) : 0)),
    // The same ratio per CPU-second of Switchyard: nearly immune to other processes taking its CPU; when the two disagree, trust this one.
    cpuNormalizedRatio: perCpuRatio(big, smalls),
    notes,
  };
}

function perCpuRatio(big: DrainRun, smalls: readonly DrainRun[]): number | undefined {
  const rates = smalls.map((run) => run.deliveriesPerSenderCpuSec);
  if (big.deliveriesPerSenderCpuSec === undefined || rates.some((rate) => rate === undefined)) return undefined;
  const small = rates.reduce<number>((sum, rate) => sum + (rate ?? 0), 0) / rates.length;
  return small > 0 ? round(big.deliveriesPerSenderCpuSec / small, 3) : undefined;
}

export const backlogBenches: readonly BenchDefinition[] = [{ name: 'backlog.1m', run: runBacklog }];
