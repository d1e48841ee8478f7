/**
 * Ingest benches (docs/targets.md, "Performance targets"): Switchyard answering
 * the Tracking API, every 200 meaning "stored", against a bare node:http
 * server that only parses the same bodies, or (ingest.track and
 * ingest.track.debugger, issue 28) against the durable baseline: a bare
 * server that also appends each body to a file and answers after a group
 * fdatasync, the least any collector whose 200 means "stored" must do;
 * ingest.track.vs-parse keeps the parse-only figure as information. The `.floor` benches put the
 * same load on a Fastify server that stores nothing instead: no target,
 * they show how much of the gap the mandated framework takes by itself.
 * The `.store-floor` benches put it on a bare server that stores each
 * message as one SQLite row before its 200: how much of the gap keeping
 * every message takes by itself, on any framework.
 */
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { type Comparison, compareUnderLoad, comparisonNotes } from './lib/compare-under-load.js';
import { bodyFactory, messagesPerRequest, payloadPath, type PayloadSpec } from './lib/payloads.js';
import { type ProcessingAtEnd, processingAfterLoad } from './lib/processing-backlog.js';
import type { Target } from './lib/target.js';

interface LoadSpec {
  readonly name: string;
  readonly description: string;
  readonly payload: PayloadSpec;
  /** The figure whose ratio is reported. */
  readonly metric: 'requests/s' | 'messages/s';
}

/** What the ratio divides by: the parse-only baseline, or the durable one (parse, append, fdatasync). */
type BaselineKind = 'parse' | 'durable';

interface IngestSpec extends LoadSpec {
  readonly target: number;
  /** The parse-only baseline when absent. */
  readonly baseline?: BaselineKind;
  /** Reported for context only, with no target (the same load judged elsewhere against another baseline). */
  readonly informational?: boolean;
  /** Keep the source's live debugger stream open and read throughout (the cost of a watching admin). */
  readonly withDebuggerStream?: boolean;
  /** Every process shares every CPU (`--unpinned` for this bench alone): the stage thread gets what wrk leaves of the second. */
  readonly unpinned?: boolean;
}

interface FloorSpec extends LoadSpec {
  /** The judged benches with the same load, whose ratio this one bounds. */
  readonly floorOf: readonly string[];
  /** Which floor server stands in Switchyard's place. */
  readonly floor: 'framework' | 'store';
}

const FLOOR_NAMES = { framework: 'Fastify floor', store: 'store floor' } as const;

interface OpenStream {
  /** Messages received on the stream so far. */
  events(): number;
  close(): void;
}

/** Opens GET /admin/v1/sources/:id/debugger/stream and reads it as fast as it comes. */
async function openDebuggerStream(target: Target): Promise<OpenStream> {
  if (target.admin === undefined) throw new Error(`${target.label} has no admin API to stream from`);
  const controller = new AbortController();
  const response = await fetch(`${target.url}/admin/v1/sources/${target.admin.sourceId}/debugger/stream`, {
    headers: { authorization: `Bearer ${target.admin.token}` },
    signal: controller.signal,
  });
  if (response.status !== 200 || response.body === null) throw new Error(`debugger stream answered ${response.status}`);
  let events = 0;
  const decoder = new TextDecoder();
  const reader = response.body.getReader();
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        // One `id:` line per message event.
        events += decoder.decode(value, { stream: true }).split('\nid:').length - 1;
      }
    } catch {
      // aborted by close()
    }
  })();
  return { events: () => events, close: () => controller.abort() };
}

interface Measured {
  readonly comparison: Comparison;
  readonly ratio: number;
  /** What the load was, for the report. */
  readonly request: Record<string, unknown>;
  readonly debuggerStreamEvents: number | undefined;
  /** Switchyard only: what was acknowledged but not yet processed when the load ended, and its drain. */
  readonly processing: ProcessingAtEnd | undefined;
}

/**
 * Runs the spec's load against a fresh baseline and the server `start`
 * makes, in the measured side's place; with --self-check a second baseline
 * takes that place, whatever the bench.
 */
async function measure(
  context: BenchContext,
  spec: LoadSpec,
  start: (label: string) => Promise<Target>,
  withDebuggerStream: boolean,
  baselineKind: BaselineKind = 'parse',
): Promise<Measured> {
  const baseline =
    baselineKind === 'durable' ? await context.startDurableBaseline(`${spec.name} durable baseline`) : await context.startBaseline(`${spec.name} baseline`);
  let measured: Target | undefined;
  try {
    measured = context.options.selfCheck ? await context.startBaseline(`${spec.name} second baseline (self-check)`) : await start(spec.name);
    const stream = withDebuggerStream && !context.options.selfCheck ? await openDebuggerStream(measured) : undefined;
    let comparison;
    let processing: ProcessingAtEnd | undefined;
    try {
      comparison = await compareUnderLoad(context, { name: spec.name, baseline, switchyard: measured, payload: spec.payload });
      // The measured side runs last in a one-round bench, so this is the end of its load.
      if (measured.admin !== undefined) processing = await processingAfterLoad(measured);
    } finally {
      stream?.close();
    }
    const figure = spec.metric === 'requests/s' ? 'requestsPerSec' : 'messagesPerSec';
    const denominator = comparison.baseline[figure];
    return {
      comparison,
      ratio: denominator > 0 ? Math.round((comparison.switchyard[figure] / denominator) * 1000) / 1000 : 0,
      request: {
        path: payloadPath(spec.payload),
        messagesPerRequest: messagesPerRequest(spec.payload),
        bodyBytes: bodyFactory(spec.payload, 'size-probe')().length,
        connections: context.options.connections,
      },
      debuggerStreamEvents: stream?.events(),
      processing,
    };
  } finally {
    await measured?.stop();
    await baseline.stop();
  }
}

function ingestBench(spec: IngestSpec): BenchDefinition {
  return {
    name: spec.name,
    async run(pinnedContext: BenchContext): Promise<BenchReport> {
      const context = spec.unpinned === true ? pinnedContext.unpinned() : pinnedContext;
      const { comparison, ratio, request, debuggerStreamEvents, processing } = await measure(
        context,
        spec,
        (name) => context.startSwitchyard(`${name} switchyard`),
        spec.withDebuggerStream === true,
        spec.baseline,
      );
      if (processing !== undefined) {
        context.log(
          `${spec.name}: ${processing.unprocessedAtEnd} acknowledged messages unprocessed at the end of the load (oldest ${processing.lagAtEndSec.toFixed(1)} s), ` +
            `drained ${processing.drainedAfterSec === undefined ? 'not within the timeout' : `after ${processing.drainedAfterSec} s`}`,
        );
      }
      const judged = spec.informational === true ? { informational: true as const } : { target: spec.target, pass: ratio >= spec.target };
      return {
        description: spec.description,
        metric: spec.metric,
        ratio,
        ...judged,
        baselineKind: spec.baseline ?? 'parse',
        ...(spec.unpinned === true && { cpus: `unpinned: every process shares ${context.cpus.available.length} CPU(s)` }),
        request,
        switchyard: comparison.switchyard,
        baseline: comparison.baseline,
        roundRatios: comparison.roundRatios,
        phases: comparison.phases,
        notes: comparisonNotes(comparison),
        ...(debuggerStreamEvents !== undefined && { debuggerStreamEvents }),
        ...(processing !== undefined && { processing: { ...processing, cpuMicrosPerMessage: cpuPerMessage(comparison.switchyard, processing) } }),
      };
    },
  };
}

/**
 * Server CPU per acknowledged message, all threads: the measured phases
 * plus the drain of what they left unprocessed (a 200 is not yet a message).
 */
function cpuPerMessage(side: Comparison['switchyard'], processing: ProcessingAtEnd): number | undefined {
  if (side.serverCpuPercent === undefined || processing.drainCpuSec === undefined) return undefined;
  const messages = side.messagesPerSec * side.measuredSec;
  if (messages <= 0) return undefined;
  return Math.round(((side.serverCpuPercent / 100) * side.measuredSec + processing.drainCpuSec) * 1e6 / messages);
}

/**
 * compare-under-load names the measured side "switchyard"; in a floor
 * bench that side is a floor server, and the output must not say
 * otherwise, nor call an understated figure a "floor" in a floor bench.
 */
function asFloor(text: string, floor: FloorSpec['floor']): string {
  return text.replace(/\bswitchyard\b/g, FLOOR_NAMES[floor]).replace(/\bfigure is a floor\b/g, 'figure is a lower bound');
}

function floorBench(spec: FloorSpec): BenchDefinition {
  return {
    name: spec.name,
    // The store floor is an embedded database's bound: against PostgreSQL it would bound nothing.
    ...(spec.floor === 'store' && { stores: ['sqlite'] as const }),
    async run(context: BenchContext): Promise<BenchReport> {
      const start = (name: string): Promise<Target> =>
        spec.floor === 'framework' ? context.startFrameworkFloor(`${name} fastify floor`) : context.startStoreFloor(`${name} store floor`);
      const { comparison, ratio, request } = await measure(context, spec, start, false);
      return {
        description: spec.description,
        metric: spec.metric,
        ratio,
        informational: true,
        floorOf: spec.floorOf,
        floorKind: spec.floor,
        request,
        floor: comparison.switchyard,
        baseline: comparison.baseline,
        roundRatios: comparison.roundRatios,
        phases: comparison.phases.map((phase) => (phase.side === 'switchyard' ? { ...phase, side: 'floor' } : phase)),
        notes: comparisonNotes(comparison).map((note) => asFloor(note, spec.floor)),
      };
    },
  };
}

const FLOOR_DESCRIPTION =
  'Informational, no target: a Fastify 5 server that only lets Fastify\'s default JSON parser read the body and answers 200, ' +
  'in Switchyard\'s place: the best any Fastify-based collector can do on this machine before storing anything.';
const STORE_FLOOR_DESCRIPTION =
  'Informational, no target: a bare node:http server that parses the body like the baseline, stores each message as one row of an ' +
  'embedded SQLite database (WAL, synchronous NORMAL, unique messageId; every request of an event-loop turn in one transaction) and ' +
  'answers 200 after the commit, in Switchyard\'s place: the best any collector that keeps every message as a row can do on this machine, ' +
  'with no framework and none of the later stages (normalization, routing, delivery jobs, profiles).';

export const ingestBenches: readonly BenchDefinition[] = [
  ingestBench({
    name: 'ingest.track',
    description:
      'POST /v1/track, one ~600-byte message per request, each with a new messageId; 200 = stored; ' +
      'against the durable baseline (parse, append to a file, answer after a group fdatasync)',
    payload: { kind: 'track' },
    metric: 'requests/s',
    target: 0.75,
    baseline: 'durable',
  }),
  ingestBench({
    name: 'ingest.track.two-cpus',
    description:
      'Informational, no target: ingest.track with every process sharing both CPUs, against the durable baseline sharing them the same way: ' +
      'the later stages (processing, Engage) on a stage thread beside the load generator, as a user\'s 2-CPU machine runs them',
    payload: { kind: 'track' },
    metric: 'requests/s',
    target: 0,
    baseline: 'durable',
    informational: true,
    unpinned: true,
  }),
  ingestBench({
    name: 'ingest.track.vs-parse',
    description:
      'Informational, no target: the load of ingest.track against the parse-only baseline (parse, store nothing), ' +
      'which no collector that stores each message durably can match on one CPU',
    payload: { kind: 'track' },
    metric: 'requests/s',
    target: 0,
    informational: true,
  }),
  floorBench({
    name: 'ingest.track.floor',
    description: `${FLOOR_DESCRIPTION} Same load as ingest.track.`,
    payload: { kind: 'track' },
    metric: 'requests/s',
    floorOf: ['ingest.track', 'ingest.track.debugger'],
    floor: 'framework',
  }),
  floorBench({
    name: 'ingest.track.store-floor',
    description: `${STORE_FLOOR_DESCRIPTION} Same load as ingest.track.`,
    payload: { kind: 'track' },
    metric: 'requests/s',
    floorOf: ['ingest.track', 'ingest.track.debugger'],
    floor: 'store',
  }),
  ingestBench({
    name: 'ingest.track.debugger',
    description: 'ingest.track with the source\'s live debugger stream open and read throughout (issue 5: the debugger must not slow ingest)',
    payload: { kind: 'track' },
    metric: 'requests/s',
    target: 0.75,
    baseline: 'durable',
    withDebuggerStream: true,
  }),
  ingestBench({
    name: 'ingest.batch',
    description: 'POST /v1/batch of 100 ~600-byte messages, each with a new messageId; 200 = all stored',
    payload: { kind: 'batch', size: 100 },
    metric: 'messages/s',
    target: 0.5,
  }),
  floorBench({
    name: 'ingest.batch.floor',
    description: `${FLOOR_DESCRIPTION} Same load as ingest.batch.`,
    payload: { kind: 'batch', size: 100 },
    metric: 'messages/s',
    floorOf: ['ingest.batch'],
    floor: 'framework',
  }),
  floorBench({
    name: 'ingest.batch.store-floor',
    description: `${STORE_FLOOR_DESCRIPTION} Same load as ingest.batch.`,
    payload: { kind: 'batch', size: 100 },
    metric: 'messages/s',
    floorOf: ['ingest.batch'],
    floor: 'store',
  }),
];
