import { randomBytes } from 'node:crypto';
import type { BenchContext } from './bench-types.js';
import { LatencyHistogram, type LatencySummary } from './latency-histogram.js';
import { runPhasedLoad } from './http-load.js';
import type { LoadResult } from './load-protocol.js';
import { messagesPerRequest, type PayloadSpec } from './payloads.js';
import { machineCpu, type MachineCpu, mainThreadCpuSeconds } from './proc-stats.js';
import type { Target } from './target.js';
import { waitForQuiet } from './wait-for-quiet.js';

type Side = 'baseline' | 'switchyard';

/**
 * The load generator is pinned to one CPU (autocannon could use no more
 * anyway); past this share of it, it is close enough to saturation that the
 * figure may be its limit, not the server's.
 */
const LOAD_GENERATOR_BOUND_PERCENT = 85;

/** Figures of one side of a comparison, over all its measured phases. */
export interface SideFigures {
  readonly requestsPerSec: number;
  readonly messagesPerSec: number;
  readonly latencyMs: LatencySummary;
  /** 2xx responses counted in the figures above. */
  readonly requests: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly statusCodes: Readonly<Record<string, number>>;
  readonly measuredSec: number;
  readonly serverPeakRssMb: number | undefined;
  /** 100 = one CPU fully busy. Near the server's CPU count: the server is CPU-bound. */
  readonly serverCpuPercent: number | undefined;
  /**
   * CPU of the server process, all its threads, per 2xx message (µs): what a
   * message costs, on any number of cores.
   */
  readonly cpuMicrosPerMessage: number | undefined;
  /**
   * CPU of the server's main thread alone per 2xx message (µs). In
   * Switchyard that is the thread that answers HTTP: ingest alone when a
   * stage thread runs the later stages (unpinned, or with more than one CPU
   * for servers), every stage when `serve` found one CPU and runs them all on
   * one loop. What the rate would be on a machine whose other cores take
   * the later stages: baseline's figure ÷ this one.
   */
  readonly mainThreadCpuMicrosPerMessage: number | undefined;
  /** Which load generator ran (lib/http-load.ts picks wrk when installed). */
  readonly loadGenerator: string;
  /** Near 100: the load generator itself was the limit, and the figures understate the server. */
  readonly loadGeneratorCpuPercent: number;
  /**
   * CPU used by everything else on the machine meanwhile (other users, this
   * runner), and CPU the hypervisor withheld:
   * when these are high, the figures are noisy.
   */
  readonly otherCpuPercent: number | undefined;
  readonly stealPercent: number | undefined;
  /**
   * CPU the other server of the pair used meanwhile. It gets no requests
   * but shares the server CPU, so background work there (Switchyard's
   * pollers, checkpoints, GC after a burst) slows this side.
   */
  readonly idlePartnerCpuPercent: number | undefined;
}

export interface Comparison {
  readonly baseline: SideFigures;
  readonly switchyard: SideFigures;
  /**
   * Every measured phase in the order run, to show the noise: CPU taken by
   * the rest of the machine, and the server's own CPU (a phase where the
   * same server needs more CPU per request ran on a slower or shared core).
   */
  readonly phases: ReadonlyArray<PhaseFigures>;
  /** Switchyard ÷ baseline requests/s of each round alone: their spread is the noise of the ratio. */
  readonly roundRatios: readonly number[];
}

export interface LoadComparison {
  readonly name: string;
  readonly baseline: Target;
  readonly switchyard: Target;
  readonly payload: PayloadSpec;
}

interface PhaseFigures {
  readonly side: Side;
  readonly round: number;
  readonly requestsPerSec: number;
  readonly serverCpuPercent: number | undefined;
  readonly otherCpuPercent: number | undefined;
}

interface PhaseCpu {
  readonly serverSec: number | undefined;
  readonly serverMainThreadSec: number | undefined;
  readonly partnerSec: number | undefined;
  readonly otherSec: number | undefined;
  readonly stealSec: number | undefined;
}

interface Totals {
  generator: string | undefined;
  measuredSec: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  latency: LatencyHistogram;
  loadCpuSec: number;
  serverCpuSec: number | undefined;
  serverMainThreadCpuSec: number | undefined;
  partnerCpuSec: number | undefined;
  otherCpuSec: number | undefined;
  stealSec: number | undefined;
}

/**
 * Puts the same load on the baseline and on Switchyard, alternating
 * baseline-Switchyard then Switchyard-baseline (ABBA) so that drift in a
 * shared machine's speed lands on both sides alike. Every phase has its own
 * warm-up and its own load-generator process.
 */
export async function compareUnderLoad(context: BenchContext, comparison: LoadComparison): Promise<Comparison> {
  const { options } = context;
  const runId = randomBytes(4).toString('hex');
  const phaseSec = Math.max(1, options.durationSec / options.rounds);
  const totals = { baseline: emptyTotals(), switchyard: emptyTotals() };
  const phases: Array<Comparison['phases'][number]> = [];
  const roundRatios: number[] = [];

  for (let round = 1; round <= options.rounds; round++) {
    const order: readonly Side[] = round % 2 === 1 ? ['baseline', 'switchyard'] : ['switchyard', 'baseline'];
    const rates: Partial<Record<Side, number>> = {};
    for (const side of order) {
      const target = comparison[side];
      const partner = comparison[side === 'baseline' ? 'switchyard' : 'baseline'];
      if (options.quietWaitSec > 0) {
        const { waitedSec, quiet } = await waitForQuiet(options.quietWaitSec);
        if (!quiet) context.log(`${comparison.name}: the machine is still busy after ${waitedSec} s; measuring anyway`);
      }
      let serverAtStart: number | undefined;
      let serverMainThreadAtStart: number | undefined;
      let partnerAtStart: number | undefined;
      let machineAtStart: MachineCpu | undefined;
      const result = await runPhasedLoad(
        {
          url: target.url,
          headers: target.headers,
          payload: comparison.payload,
          connections: options.connections,
          warmupSec: options.warmupSec,
          durationSec: phaseSec,
          idPrefix: `${runId}${side[0]}${round}`,
        },
        {
          cpus: context.cpus.loadGenerator,
          onMeasuring: () => {
            serverAtStart = target.cpuSeconds();
            serverMainThreadAtStart = mainThreadCpuSeconds(target.pid);
            partnerAtStart = partner.cpuSeconds();
            machineAtStart = machineCpu();
          },
        },
      );
      const serverAtEnd = target.cpuSeconds();
      const serverMainThreadAtEnd = mainThreadCpuSeconds(target.pid);
      const partnerAtEnd = partner.cpuSeconds();
      const machineAtEnd = machineCpu();
      const failure = target.failure();
      if (failure !== undefined) throw new Error(failure);

      const serverSec = difference(serverAtEnd, serverAtStart);
      const busySec = difference(machineAtEnd?.busySec, machineAtStart?.busySec);
      const partnerSec = difference(partnerAtEnd, partnerAtStart);
      const otherSec =
        busySec === undefined || serverSec === undefined || partnerSec === undefined
          ? undefined
          : Math.max(0, busySec - serverSec - partnerSec - result.cpuSec);
      accumulate(totals[side], result, {
        serverSec,
        serverMainThreadSec: difference(serverMainThreadAtEnd, serverMainThreadAtStart),
        partnerSec, otherSec, stealSec: difference(machineAtEnd?.stealSec, machineAtStart?.stealSec) });
      const requestsPerSec = result.ok / result.durationSec;
      rates[side] = requestsPerSec;
      const percent = (cpuSec: number | undefined): number | undefined => (cpuSec === undefined ? undefined : round1((100 * cpuSec) / result.durationSec));
      phases.push({ side, round, requestsPerSec: round1(requestsPerSec), serverCpuPercent: percent(serverSec), otherCpuPercent: percent(otherSec) });
      context.log(
        `${comparison.name}: ${side} round ${round}/${options.rounds}: ${round1(requestsPerSec)} req/s, ` +
          `${result.non2xx} non-2xx, ${result.errors} errors`,
      );
    }
    if (rates.baseline !== undefined && rates.switchyard !== undefined && rates.baseline > 0) {
      roundRatios.push(Math.round((rates.switchyard / rates.baseline) * 1000) / 1000);
    }
  }

  const perRequest = messagesPerRequest(comparison.payload);
  return {
    baseline: figures(totals.baseline, comparison.baseline, perRequest),
    switchyard: figures(totals.switchyard, comparison.switchyard, perRequest),
    phases,
    roundRatios,
  };
}

/** Plain-language caveats that a reader of the figures must not miss. */
export function comparisonNotes(comparison: Comparison): string[] {
  const notes: string[] = [];
  for (const side of ['baseline', 'switchyard'] as const) {
    const figures = comparison[side];
    if (figures.loadGeneratorCpuPercent >= LOAD_GENERATOR_BOUND_PERCENT) {
      notes.push(
        `the load generator (${figures.loadGenerator}) was CPU-bound during the ${side} phases (${figures.loadGeneratorCpuPercent}% of its CPU): ` +
          `the ${side} figure is a floor` + (side === 'baseline' ? ', so the ratio is flattered' : ''),
      );
    }
    if ((figures.otherCpuPercent ?? 0) >= 20 || (figures.stealPercent ?? 0) >= 10) {
      notes.push(
        `${side}: other processes used ${figures.otherCpuPercent}% of a CPU and the hypervisor withheld ${figures.stealPercent}% ` +
          'during the measured phases: the machine was busy, expect noise (see roundRatios)',
      );
    }
    if ((figures.idlePartnerCpuPercent ?? 0) >= 10) {
      const partner = side === 'baseline' ? 'switchyard' : 'baseline';
      notes.push(
        `during the ${side} phases the idle ${partner} server used ${figures.idlePartnerCpuPercent}% of a CPU, ` +
          `taken from the CPU the ${side} server needed`,
      );
    }
    if (figures.non2xx > 0 || figures.errors > 0) {
      notes.push(
        `${side}: ${figures.non2xx} non-2xx responses ${JSON.stringify(figures.statusCodes)} and ${figures.errors} errors ` +
          `(${figures.timeouts} timeouts); only 2xx responses count towards throughput`,
      );
    }
  }
  return notes;
}

function emptyTotals(): Totals {
  return {
    generator: undefined, measuredSec: 0, ok: 0, non2xx: 0, errors: 0, timeouts: 0, statusCodes: {}, latency: new LatencyHistogram(),
    loadCpuSec: 0, serverCpuSec: 0, serverMainThreadCpuSec: 0, partnerCpuSec: 0, otherCpuSec: 0, stealSec: 0,
  };
}

function accumulate(totals: Totals, result: LoadResult, cpu: PhaseCpu): void {
  totals.generator = result.generator;
  totals.measuredSec += result.durationSec;
  totals.ok += result.ok;
  totals.non2xx += result.non2xx;
  totals.errors += result.errors;
  totals.timeouts += result.timeouts;
  for (const [code, count] of Object.entries(result.statusCodes)) totals.statusCodes[code] = (totals.statusCodes[code] ?? 0) + count;
  totals.latency.add(result.latency);
  totals.loadCpuSec += result.cpuSec;
  totals.serverCpuSec = addKnown(totals.serverCpuSec, cpu.serverSec);
  totals.serverMainThreadCpuSec = addKnown(totals.serverMainThreadCpuSec, cpu.serverMainThreadSec);
  totals.partnerCpuSec = addKnown(totals.partnerCpuSec, cpu.partnerSec);
  totals.otherCpuSec = addKnown(totals.otherCpuSec, cpu.otherSec);
  totals.stealSec = addKnown(totals.stealSec, cpu.stealSec);
}

function figures(totals: Totals, target: Target, perRequest: number): SideFigures {
  const seconds = totals.measuredSec || 1;
  const requestsPerSec = totals.ok / seconds;
  const percent = (cpuSec: number | undefined): number | undefined => (cpuSec === undefined ? undefined : round1((100 * cpuSec) / seconds));
  const microsPerMessage = (cpuSec: number | undefined): number | undefined =>
    cpuSec === undefined || totals.ok === 0 ? undefined : Math.round((cpuSec * 1e6) / (totals.ok * perRequest));
  return {
    requestsPerSec: round1(requestsPerSec),
    messagesPerSec: round1(requestsPerSec * perRequest),
    latencyMs: totals.latency.summary(),
    requests: totals.ok,
    non2xx: totals.non2xx,
    errors: totals.errors,
    timeouts: totals.timeouts,
    statusCodes: totals.statusCodes,
    measuredSec: round1(totals.measuredSec),
    serverPeakRssMb: target.peakRssMb(),
    serverCpuPercent: percent(totals.serverCpuSec),
    cpuMicrosPerMessage: microsPerMessage(totals.serverCpuSec),
    mainThreadCpuMicrosPerMessage: microsPerMessage(totals.serverMainThreadCpuSec),
    loadGenerator: totals.generator ?? 'none',
    loadGeneratorCpuPercent: round1((100 * totals.loadCpuSec) / seconds),
    otherCpuPercent: percent(totals.otherCpuSec),
    stealPercent: percent(totals.stealSec),
    idlePartnerCpuPercent: percent(totals.partnerCpuSec),
  };
}

/** A sum that becomes unknown as soon as one term is. */
function addKnown(total: number | undefined, value: number | undefined): number | undefined {
  return total === undefined || value === undefined ? undefined : total + value;
}

function difference(end: number | undefined, start: number | undefined): number | undefined {
  return end === undefined || start === undefined ? undefined : end - start;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
