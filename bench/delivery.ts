/**
 * Delivery benches (docs/targets.md, "Performance targets"):
 *
 * - delivery.throughput: a backlog of 100,000 signed deliveries drained to
 *   a local receiver, against bare undici POSTs of the same bodies with the
 *   same headers to the same receiver at the same concurrency; with the
 *   store floor and the delivery-log floor (lib/delivery-floor.ts) beside
 *   them, as information.
 * - delivery.latency: ingest to receiver at 1,000 messages/s.
 *
 * Processes: Switchyard (or, in its place, the baseline poster) on the
 * server CPU(s); the receiver, and the paced sender of delivery.latency, on
 * the load generator's CPU. See lib/delivery-rig.ts for the setup.
 */
import { fileURLToPath } from 'node:url';
import { defaultWorkerLimits } from '../src/delivery/delivery-worker.js';
import { loadConfig } from '../src/config.js';
import { VERSION } from '../src/version.js';
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { spawnManaged } from './lib/children.js';
import { type PosterArgs, type PosterLine, preciseNow, type SenderArgs, type SenderLine } from './lib/delivery-protocol.js';
import { createRig, type DrainFigures, maybeWaitQuiet, measureDrain, type Rig, round, SHARED_SECRET, type Watched } from './lib/delivery-rig.js';
import { cpuSeconds, machineCpu, type MachineCpu } from './lib/proc-stats.js';
import { lastLines } from './lib/target.js';

const POSTER = fileURLToPath(new URL('./lib/delivery-poster.js', import.meta.url));
const FLOOR = fileURLToPath(new URL('./lib/delivery-floor.js', import.meta.url));
const SENDER = fileURLToPath(new URL('./lib/delivery-sender.js', import.meta.url));

const THROUGHPUT_JOBS = 100_000;
const THROUGHPUT_TARGET = 0.5;
/** The share of the backlog before the window opens and after it closes: start-up and tail are not the steady rate. */
const EDGE_SHARE = 0.05;

const LATENCY_RATE = 1_000;
const LATENCY_P99_TARGET_MS = 50;
/** After the last send, how long measured messages may take to arrive before they count as missing. */
const LATENCY_GRACE_MS = 10_000;

/** Switchyard's defaults, read from the code so the baseline follows them: requests in flight per receiver. */
function switchyardPerOrigin(): number {
  return defaultWorkerLimits(loadConfig({}, {})).perOrigin;
}

// --- delivery.throughput ----------------------------------------------------------

interface SideFigures extends DrainFigures {
  readonly peakRssMb?: number | undefined;
  /** Of the phase's POSTs, how many carried an X-Signature (all of them should). */
  readonly signedPosts: number;
  readonly deliveredTotal: number;
}

async function runThroughput(context: BenchContext): Promise<BenchReport> {
  const { options } = context;
  const log = (message: string): void => context.log(message);
  const name = 'delivery.throughput';
  const concurrency = switchyardPerOrigin();
  const startCount = Math.round(THROUGHPUT_JOBS * EDGE_SHARE);
  const endCount = THROUGHPUT_JOBS - startCount;
  const marks = [1, startCount, endCount, THROUGHPUT_JOBS];
  // A drain well below the target takes longer than one that meets it; bounded all the same.
  const timeoutSec = Math.max(45, 12 * options.durationSec);
  const plan = { total: THROUGHPUT_JOBS, startCount, endCount, warmupSec: Infinity, windowSec: Infinity, timeoutSec };

  const { rig } = await createRig(context, name);
  try {
    log(`${name}: prefilling ${THROUGHPUT_JOBS} delivery jobs`);
    const prefill = await rig.prefill(THROUGHPUT_JOBS);
    log(`${name}: prefilled in ${prefill.seconds} s`);
    // A real backlog (a receiver down for a while) builds up while Switchyard
    // runs, and its Engage reads each message as it arrives: at the drain,
    // Engage's cursor is already past them. Engage's own runner reads them
    // here, before anything is measured; the delivery jobs stay pending.
    const engage = await rig.catchUpEngage();
    log(`${name}: Engage read the ${engage.messages} prefilled messages in ${engage.seconds} s`);

    const baselines: SideFigures[] = [];
    const runBaseline = async (round: number): Promise<void> => {
      await maybeWaitQuiet(context, name);
      await rig.receiver.reset({ phase: `baseline-${round}`, marks, latency: false });
      log(`${name}: baseline round ${round} (bare undici, ${concurrency} in flight)`);
      baselines.push(await runPoster(context, rig, concurrency, plan, POSTER_SIDE));
    };

    await runBaseline(1);

    await maybeWaitQuiet(context, name);
    await rig.receiver.reset({ phase: 'switchyard', marks, latency: false });
    log(`${name}: switchyard draining`);
    const launchedAt = preciseNow();
    const server = await rig.launch(`${name} switchyard`, true);
    let switchyard: SideFigures;
    try {
      const drain = await measureDrain(rig.receiver, server, plan, launchedAt);
      // The tail is not measured, but a drain that stops short of the whole backlog is worth knowing about.
      await rig.receiver.waitFor((point) => point.count >= THROUGHPUT_JOBS, drain.windowEnd === 'timeout' ? 0 : 15_000, () => server.failure());
      const stats = await rig.receiver.stats();
      switchyard = { ...drain, deliveredTotal: stats.count, signedPosts: stats.signed, peakRssMb: server.peakRssMb() };
    } finally {
      await server.stop();
    }
    log(`${name}: switchyard ${switchyard.deliveriesPerSec} deliveries/s`);

    await runBaseline(2);

    // Information, not judged: how much of the gap is the store's part of a
    // delivery (the floor against the baseline) and how much the worker's
    // machinery (Switchyard against the floor). The floor's store is the
    // embedded one: with --store postgres it would not say which is which.
    let storeFloor: SideFigures | undefined;
    // The same floor on the proposed delivery log (a cursor per destination,
    // no row per delivery): what a cheaper queue would leave of the store's part.
    let logFloor: SideFigures | undefined;
    // And the log keeping every success's attempt (one JSON row per cursor
    // step), which the design needs for "one delivery with every attempt".
    let logSuccessesFloor: SideFigures | undefined;
    if (options.store !== 'postgres') {
      await maybeWaitQuiet(context, name);
      await rig.receiver.reset({ phase: 'store-floor', marks, latency: false });
      log(`${name}: store floor (claims, outcomes, signing and undici POSTs only)`);
      storeFloor = await runPoster(context, rig, concurrency, plan, FLOOR_SIDE);
      await maybeWaitQuiet(context, name);
      await rig.receiver.reset({ phase: 'log-floor', marks, latency: false });
      log(`${name}: delivery-log floor (messages read after a cursor, the cursor written, signing and undici POSTs only)`);
      logFloor = await runPoster(context, rig, concurrency, plan, LOG_FLOOR_SIDE);
      await maybeWaitQuiet(context, name);
      await rig.receiver.reset({ phase: 'log-successes-floor', marks, latency: false });
      log(`${name}: delivery-log floor keeping successes (the same, plus one row of attempts per cursor step)`);
      logSuccessesFloor = await runPoster(context, rig, concurrency, plan, LOG_SUCCESSES_FLOOR_SIDE);
    }

    const baselineRate = baselines.reduce((sum, side) => sum + side.deliveriesPerSec, 0) / baselines.length;
    const ratio = baselineRate > 0 ? round(switchyard.deliveriesPerSec / baselineRate, 3) : 0;
    const notes: string[] = [];
    if (options.selfCheck) notes.push('--self-check does not apply here: Switchyard itself was measured.');
    if (switchyard.windowEnd === 'timeout') {
      notes.push(`Switchyard did not reach ${endCount} deliveries within ${timeoutSec} s: its figures cover the part measured (deliveredAtEnd).`);
    }
    if (switchyard.signedPosts !== switchyard.deliveredTotal) notes.push('Some of Switchyard\'s POSTs carried no X-Signature.');
    for (const side of baselines) {
      if ((side.receiverCpuPercent ?? 0) >= 85) notes.push('The receiver was near one full CPU in a baseline round: the baseline is a floor and the ratio flatters Switchyard.');
    }
    if ((switchyard.otherCpuPercent ?? 0) >= 30) {
      notes.push(
        options.store === 'postgres'
          ? `Other processes, PostgreSQL among them, used ${switchyard.otherCpuPercent}% CPU while Switchyard was measured.`
          : `Other processes used ${switchyard.otherCpuPercent}% CPU while Switchyard was measured: a noisy run.`,
      );
    }
    return {
      description:
        `${THROUGHPUT_JOBS} pending deliveries (prefilled through the store adapter, then read by Engage as a running server would have) ` +
        'drained to a bare node:http receiver, ' +
        `signed (X-Signature); rate from the ${startCount}th to the ${endCount}th arrival at the receiver. ` +
        `Baseline: bare undici POSTs of the same bodies and headers from a separate process, ${concurrency} in flight, before and after`,
      metric: 'deliveries/s',
      ratio,
      target: THROUGHPUT_TARGET,
      pass: ratio >= THROUGHPUT_TARGET,
      jobs: THROUGHPUT_JOBS,
      concurrency,
      prefill,
      engageCatchUp: engage,
      switchyard,
      baseline: { deliveriesPerSec: Math.round(baselineRate), rounds: baselines },
      storeFloor: storeFloor && {
        ...storeFloor,
        ratio: baselineRate > 0 ? round(storeFloor.deliveriesPerSec / baselineRate, 3) : 0,
        switchyardToFloor: storeFloor.deliveriesPerSec > 0 ? round(switchyard.deliveriesPerSec / storeFloor.deliveriesPerSec, 3) : 0,
      },
      logFloor: logFloor && {
        ...logFloor,
        ratio: baselineRate > 0 ? round(logFloor.deliveriesPerSec / baselineRate, 3) : 0,
      },
      logSuccessesFloor: logSuccessesFloor && {
        ...logSuccessesFloor,
        ratio: baselineRate > 0 ? round(logSuccessesFloor.deliveriesPerSec / baselineRate, 3) : 0,
      },
      roundRatios: baselines.map((side) => (side.deliveriesPerSec > 0 ? round(switchyard.deliveriesPerSec / side.deliveriesPerSec, 3) : 0)),
      // Deliveries per CPU-second of the sending process, Switchyard ÷ poster: robust to other processes taking the server CPU.
      cpuNormalizedRatio: cpuNormalized(switchyard, baselines),
      notes,
    };
  } finally {
    await rig.close();
  }
}

function cpuNormalized(switchyard: SideFigures, baselines: readonly SideFigures[]): number | undefined {
  const rates = baselines.map((side) => side.deliveriesPerSenderCpuSec);
  if (switchyard.deliveriesPerSenderCpuSec === undefined || rates.some((rate) => rate === undefined)) return undefined;
  const baseline = rates.reduce<number>((sum, rate) => sum + (rate ?? 0), 0) / rates.length;
  return baseline > 0 ? round(switchyard.deliveriesPerSenderCpuSec / baseline, 3) : undefined;
}

/** A process that drains the backlog in Switchyard's place, speaking the poster's protocol. */
interface PosterSide {
  readonly script: string;
  readonly label: string;
  /** After the PosterArgs JSON on its command line. */
  readonly extraArgs?: readonly string[];
}

const POSTER_SIDE: PosterSide = { script: POSTER, label: 'the baseline poster' };
const FLOOR_SIDE: PosterSide = { script: FLOOR, label: 'the store floor' };
const LOG_FLOOR_SIDE: PosterSide = { script: FLOOR, label: 'the delivery-log floor', extraArgs: ['log'] };
const LOG_SUCCESSES_FLOOR_SIDE: PosterSide = { script: FLOOR, label: 'the delivery-log floor keeping successes', extraArgs: ['log-successes'] };

/**
 * One round of a side in Switchyard's place: the baseline poster POSTs the
 * whole backlog's bodies; the store floor drains its own copy of the backlog.
 * Measured at the receiver as Switchyard is.
 */
async function runPoster(context: BenchContext, rig: Rig, concurrency: number, plan: Parameters<typeof measureDrain>[2], side: PosterSide): Promise<SideFigures> {
  const args: PosterArgs = {
    url: rig.receiver.hookUrl,
    count: plan.total,
    concurrency,
    idPrefix: rig.idPrefix,
    receivedAt: rig.receivedAt,
    sharedSecret: SHARED_SECRET,
    userAgent: `Switchyard/${VERSION}`,
  };
  let onReady: (() => void) | undefined;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  let done: Extract<PosterLine, { event: 'done' }> | undefined;
  let error: string | undefined;
  const child = spawnManaged(side.label, process.execPath, [side.script, JSON.stringify(args), ...(side.extraArgs ?? [])], {
    cpus: context.cpus.server,
    onStdoutLine: (line) => {
      let message: PosterLine;
      try {
        message = JSON.parse(line) as PosterLine;
      } catch {
        return;
      }
      if (message.event === 'ready') onReady?.();
      else if (message.event === 'done') done = message;
      else error = message.message;
    },
  });
  const watched: Watched = {
    pid: child.pid,
    cpuSeconds: () => cpuSeconds(child.pid),
    failure: () => {
      const status = child.exitStatus();
      if (status === undefined || (status.code === 0 && error === undefined)) return undefined;
      return `${side.label} failed (code ${status.code ?? status.signal}): ${error ?? lastLines(child.outputTail())}`;
    },
  };
  try {
    await Promise.race([ready, child.exited]);
    const failure = watched.failure();
    if (failure !== undefined) throw new Error(failure);
    const drain = await measureDrain(rig.receiver, watched, plan);
    await Promise.race([child.exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    const stats = await rig.receiver.stats();
    if (done !== undefined && (done.errors > 0 || done.non2xx > 0)) {
      throw new Error(`${side.label} had ${done.errors} errors and ${done.non2xx} non-2xx answers: ${done.firstError ?? ''}`);
    }
    return { ...drain, deliveredTotal: stats.count, signedPosts: stats.signed };
  } finally {
    await child.stop(1000);
  }
}

// --- delivery.latency ----------------------------------------------------------------

async function runLatency(context: BenchContext): Promise<BenchReport> {
  const { options } = context;
  const log = (message: string): void => context.log(message);
  const name = 'delivery.latency';
  const { rig, running } = await createRig(context, name, true);
  const server = running!;
  try {
    await rig.receiver.reset({ phase: 'latency', marks: [], latency: true, slowMs: LATENCY_P99_TARGET_MS });
    await maybeWaitQuiet(context, name);
    log(`${name}: ${LATENCY_RATE} /v1/track calls/s for ${options.warmupSec} s warm-up + ${options.durationSec} s`);
    const args: SenderArgs = {
      url: server.url,
      authorization: rig.authorization,
      ratePerSec: LATENCY_RATE,
      warmupSec: options.warmupSec,
      durationSec: options.durationSec,
      idPrefix: `${rig.idPrefix}l`,
      connections: 32,
    };
    let result: Extract<SenderLine, { event: 'result' }> | undefined;
    let error: string | undefined;
    let serverAtStart: number | undefined;
    let receiverAtStart: number | undefined;
    let measuringSince: number | undefined;
    let machineAtStart: MachineCpu | undefined;
    const sender = spawnManaged('latency sender', process.execPath, [SENDER, JSON.stringify(args)], {
      cpus: context.cpus.loadGenerator,
      onStdoutLine: (line) => {
        let message: SenderLine;
        try {
          message = JSON.parse(line) as SenderLine;
        } catch {
          return;
        }
        if (message.event === 'measuring') {
          serverAtStart = server.cpuSeconds();
          receiverAtStart = rig.receiver.cpuSeconds();
          machineAtStart = machineCpu();
          measuringSince = performance.now();
        } else if (message.event === 'result') result = message;
        else error = message.message;
      },
    });
    const bound = (options.warmupSec + options.durationSec) * 1000 + 30_000;
    const timer = setTimeout(() => void sender.stop(1000), bound);
    await sender.exited.finally(() => clearTimeout(timer));
    const measuredSec = measuringSince === undefined ? 0 : (performance.now() - measuringSince) / 1000;
    const serverCpu = serverAtStart === undefined ? undefined : (server.cpuSeconds() ?? 0) - serverAtStart;
    const receiverCpu = receiverAtStart === undefined ? undefined : (rig.receiver.cpuSeconds() ?? 0) - receiverAtStart;
    const machineAtEnd = machineCpu();
    if (result === undefined) throw new Error(`the latency sender failed: ${error ?? lastLines(sender.outputTail())}`);
    const failure = server.failure();
    if (failure !== undefined) throw new Error(failure);

    // Wait for the stragglers; whatever has not arrived by then is reported missing.
    const expected = result.okMeasured;
    const graceUntil = Date.now() + LATENCY_GRACE_MS;
    let stats = await rig.receiver.stats();
    while (stats.measured < expected && Date.now() < graceUntil) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      stats = await rig.receiver.stats();
    }
    const missing = Math.max(0, expected - stats.measured);
    const p99 = stats.latencyMs.p99;
    // Every missing message is later than any that arrived: beyond 1% of them, the true p99 is past the grace period.
    const tooManyMissing = missing * 100 > expected;
    const withinTarget = p99 <= LATENCY_P99_TARGET_MS && !tooManyMissing && stats.measured > 0;

    const notes: string[] = [
      'ratio = target p99 (50 ms) ÷ measured p99, so that, as in every bench, ratio >= target (1) passes; the p99 itself is endToEndMs.p99.',
    ];
    if (options.selfCheck) notes.push('--self-check does not apply here: Switchyard itself was measured.');
    if (missing > 0) notes.push(`${missing} of ${expected} accepted messages had not reached the receiver ${LATENCY_GRACE_MS / 1000} s after the last send.`);
    if (result.maxScheduleLagMs > 50) notes.push(`The sender fell up to ${result.maxScheduleLagMs} ms behind its schedule (a busy load-generator CPU): sends came in bursts.`);
    if (result.non2xx > 0 || result.errors > 0) notes.push(`Ingest answered ${result.non2xx} non-2xx and ${result.errors} errors (${result.firstError ?? ''}).`);
    const percent = (cpu: number | undefined): number | undefined => (cpu === undefined || measuredSec <= 0 ? undefined : Math.round((cpu / measuredSec) * 100));
    // Everything on the machine but the three processes of this bench: other people's work competes for the same CPUs.
    const otherCpu =
      machineAtStart === undefined || machineAtEnd === undefined
        ? undefined
        : Math.max(0, machineAtEnd.busySec - machineAtStart.busySec - (serverCpu ?? 0) - (receiverCpu ?? 0) - result.cpuSec);
    const otherCpuPercent = percent(otherCpu);
    if ((otherCpuPercent ?? 0) >= 30) notes.push(`Other processes${options.store === 'postgres' ? ', PostgreSQL among them,' : ''} used ${otherCpuPercent}% CPU meanwhile.`);
    const stallSeconds = stats.perSecond.filter((bucket) => bucket.slow > 0);
    return {
      description:
        `Single POST /v1/track calls at ${LATENCY_RATE}/s from a paced client process; each carries its send time, and the ` +
        'receiver records send-to-arrival of the signed webhook POST. Warm-up messages are not timed.',
      metric: 'target p99 ms ÷ measured p99 ms',
      ratio: p99 > 0 ? round(LATENCY_P99_TARGET_MS / p99, 3) : 0,
      target: 1,
      pass: withinTarget,
      targetP99Ms: LATENCY_P99_TARGET_MS,
      endToEndMs: stats.latencyMs,
      ingestResponseMs: result.ingestLatencyMs,
      ratePerSec: LATENCY_RATE,
      measuredSec: round(measuredSec, 2),
      sent: { warmup: result.sentWarmup, measured: result.sentMeasured, acceptedMeasured: expected },
      delivered: stats.measured,
      missing,
      signedPosts: stats.signed,
      receivedPosts: stats.count,
      serverCpuPercent: percent(serverCpu),
      // Ingest and delivery of each accepted message, all of the server's threads.
      cpuMicrosPerMessage: serverCpu === undefined || expected <= 0 ? undefined : Math.round((serverCpu * 1e6) / expected),
      receiverCpuPercent: percent(receiverCpu),
      senderCpuPercent: percent(result.cpuSec),
      otherCpuPercent,
      stealPercent: machineAtStart === undefined || machineAtEnd === undefined ? undefined : percent(machineAtEnd.stealSec - machineAtStart.stealSec),
      // Seconds of the measured part (by send time) with messages over the target: one stall, or all along?
      secondsWithSlowMessages: `${stallSeconds.length} of ${stats.perSecond.length}`,
      slowSeconds: stallSeconds.map((bucket) => ({ second: bucket.second, over50Ms: bucket.slow, of: bucket.messages, maxMs: bucket.maxMs })),
      serverPeakRssMb: server.peakRssMb(),
      maxScheduleLagMs: result.maxScheduleLagMs,
      notes,
    };
  } finally {
    await server.stop();
    await rig.close();
  }
}

// --- delivery.ordered -------------------------------------------------------------

const ORDERED_KEYS = 10_000;
const ORDERED_TARGET = 0.8;

/**
 * delivery.throughput's backlog drained twice by Switchyard, on two fresh
 * stores: once with its deliveries ordered per user (spread over 10,000
 * keys, as `ordering: "user"` stores them), once without. The ratio is
 * ordered ÷ unordered, one run each.
 */
async function runOrdered(context: BenchContext): Promise<BenchReport> {
  const name = 'delivery.ordered';
  const log = (message: string): void => context.log(message);
  const startCount = Math.round(THROUGHPUT_JOBS * EDGE_SHARE);
  const endCount = THROUGHPUT_JOBS - startCount;
  const marks = [1, startCount, endCount, THROUGHPUT_JOBS];
  const timeoutSec = Math.max(45, 12 * context.options.durationSec);
  const plan = { total: THROUGHPUT_JOBS, startCount, endCount, warmupSec: Infinity, windowSec: Infinity, timeoutSec };
  const drain = async (ordered: boolean): Promise<DrainFigures> => {
    const { rig } = await createRig(context, `${name} ${ordered ? 'user' : 'none'}`);
    try {
      const prefill = await rig.prefill(THROUGHPUT_JOBS, undefined, ordered ? { orderedKeys: ORDERED_KEYS } : {});
      log(`${name}: prefilled ${THROUGHPUT_JOBS} (${ordered ? `ordered over ${ORDERED_KEYS} keys` : 'unordered'}) in ${prefill.seconds} s`);
      await rig.catchUpEngage();
      await maybeWaitQuiet(context, name);
      await rig.receiver.reset({ phase: ordered ? 'ordered' : 'unordered', marks, latency: false });
      const launchedAt = preciseNow();
      const server = await rig.launch(`${name} switchyard`, true);
      try {
        const figures = await measureDrain(rig.receiver, server, plan, launchedAt);
        log(`${name}: ${ordered ? 'ordered' : 'unordered'} ${figures.deliveriesPerSec} deliveries/s`);
        return figures;
      } finally {
        await server.stop();
      }
    } finally {
      await rig.close();
    }
  };
  const unordered = await drain(false);
  const ordered = await drain(true);
  const ratio = unordered.deliveriesPerSec > 0 ? round(ordered.deliveriesPerSec / unordered.deliveriesPerSec, 3) : 0;
  return {
    description:
      `${THROUGHPUT_JOBS} pending deliveries drained as in delivery.throughput, ordered per user over ${ORDERED_KEYS} keys ` +
      `(ordering "user") against the same backlog unordered, one run each; rate from the ${startCount}th to the ${endCount}th arrival`,
    metric: 'deliveries/s ordered ÷ unordered',
    ratio,
    target: ORDERED_TARGET,
    pass: ratio >= ORDERED_TARGET,
    jobs: THROUGHPUT_JOBS,
    keys: ORDERED_KEYS,
    ordered,
    unordered,
    notes: [],
  };
}

export const deliveryBenches: readonly BenchDefinition[] = [
  { name: 'delivery.throughput', run: runThroughput },
  { name: 'delivery.ordered', run: runOrdered },
  { name: 'delivery.latency', run: runLatency },
];
