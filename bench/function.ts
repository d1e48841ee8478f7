/**
 * `function.throughput` (issue 25): a backlog of 20,000 tracks drained
 * through a function destination whose `onTrack` POSTs each message with
 * `fetch` to a local receiver, against the same backlog drained by the
 * Webhooks destination to the same receiver, in the same run: ≥ 0.6.
 *
 * One rig (lib/delivery-rig.ts): the source has both destinations, the
 * Webhooks destination and a function pointing at the same receiver; each
 * drain gets a backlog of its own, prefilled through the store adapter
 * while Switchyard is stopped (read by Engage first, as delivery.throughput
 * does), with jobs for one destination only. Phases: Webhooks, function,
 * Webhooks (the Webhooks rate is their mean), each from Switchyard's start.
 *
 * CPUs as in `ingest.live`: a function's code runs on its isolate's own
 * thread beside the thread that delivers, so when pinning would leave the
 * server one CPU (a 2-CPU machine) both drains run unpinned, as Switchyard
 * runs on such a machine (the receiver shares the CPUs, as a load
 * generator would). Pinned to one CPU, the two threads would share it and
 * the ratio would only repeat the CPU per delivery; that comparison is
 * reported beside it anyway (`cpuRatio`: the Webhooks destination's CPU per
 * delivery over the function's, about what one core would give).
 */
import { loadConfig } from '../src/config.js';
import type { DeliveryTarget } from '../src/domain/routing.js';
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { preciseNow } from './lib/delivery-protocol.js';
import { admin, createRig, type DrainFigures, maybeWaitQuiet, measureDrain, type Rig, round } from './lib/delivery-rig.js';
import { sandboxHeapBytes, serversGetTwoCpus } from './live.js';

/** The backlog; BENCH_FUNCTION_JOBS (at least 2,000) makes a quicker check. */
const JOBS = Math.max(2_000, Number(process.env['BENCH_FUNCTION_JOBS'] ?? 20_000) || 20_000);
const TARGET = 0.6;
/** The share of the backlog before the window opens and after it closes, as in delivery.throughput. */
const EDGE_SHARE = 0.05;

/** Segment's shape: one POST per track, retried on a 5xx, failed on any other non-2xx. */
const POST_EACH = `async function onTrack(event, settings) {
  const response = await fetch(settings.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(event),
  });
  if (response.status >= 500) throw new RetryError('the receiver answered ' + response.status);
  if (!response.ok) throw new Error('the receiver answered ' + response.status);
}`;

interface Drain extends DrainFigures {
  readonly destination: string;
  readonly deliveredTotal: number;
  readonly peakRssMb: number | undefined;
  /** The function's isolate heap in use at the end of the drain (`switchyard_sandbox_heap_bytes`); function drains only. */
  readonly isolateHeapBytes?: number | undefined;
}

async function drain(context: BenchContext, rig: Rig, destination: DeliveryTarget, phase: string): Promise<Drain> {
  const name = 'function.throughput';
  const startCount = Math.round(JOBS * EDGE_SHARE);
  const endCount = JOBS - startCount;
  const timeoutSec = Math.max(45, 12 * context.options.durationSec);
  const prefill = await rig.prefill(JOBS, undefined, { destination });
  await rig.catchUpEngage();
  context.log(`${name}: ${phase}: prefilled ${JOBS} jobs for ${destination} in ${prefill.seconds} s`);
  await maybeWaitQuiet(context, name);
  await rig.receiver.reset({ phase, marks: [1, startCount, endCount, JOBS], latency: false });
  const launchedAt = preciseNow();
  const server = await rig.launch(`${name} ${phase}`, true);
  try {
    const figures = await measureDrain(rig.receiver, server, { total: JOBS, startCount, endCount, warmupSec: Infinity, windowSec: Infinity, timeoutSec }, launchedAt);
    await rig.receiver.waitFor((point) => point.count >= JOBS, figures.windowEnd === 'timeout' ? 0 : 15_000, () => server.failure());
    const stats = await rig.receiver.stats();
    const heap = destination === 'webhooks' ? undefined : await sandboxHeapBytes(server, 'function');
    context.log(`${name}: ${phase}: ${figures.deliveriesPerSec} deliveries/s, ${figures.cpuMicrosPerDelivery ?? '?'} µs of CPU each`);
    return { destination, ...figures, deliveredTotal: stats.count, peakRssMb: server.peakRssMb(), ...(heap !== undefined && { isolateHeapBytes: heap }) };
  } finally {
    await server.stop();
  }
}

async function runFunctionThroughput(pinnedContext: BenchContext): Promise<BenchReport> {
  const name = 'function.throughput';
  const context = serversGetTwoCpus(pinnedContext, name, "the function's isolate thread");
  const { rig, running } = await createRig(context, name, true);
  try {
    const server = running!;
    let functionId: string;
    try {
      const created = await admin(server.url, rig.adminToken, 'POST', `/admin/v1/sources/${rig.source.id}/destinations/functions`, {
        name: 'Bench',
        code: POST_EACH,
        settings: { url: rig.receiver.hookUrl },
      }, 201);
      functionId = String(created['id']);
    } finally {
      await server.stop();
    }
    const webhooks: Drain[] = [];
    webhooks.push(await drain(context, rig, 'webhooks', 'webhooks-1'));
    const fn = await drain(context, rig, `function:${functionId}`, 'function');
    webhooks.push(await drain(context, rig, 'webhooks', 'webhooks-2'));

    const webhookRate = webhooks.reduce((sum, side) => sum + side.deliveriesPerSec, 0) / webhooks.length;
    const ratio = webhookRate > 0 ? round(fn.deliveriesPerSec / webhookRate, 3) : 0;
    const notes: string[] = [];
    if (fn.windowEnd === 'timeout') notes.push(`The function's drain did not reach ${JOBS - Math.round(JOBS * EDGE_SHARE)} deliveries in time: its figures cover the part measured.`);
    if (fn.deliveredTotal < JOBS) notes.push(`The receiver got ${fn.deliveredTotal} of the function's ${JOBS} POSTs.`);
    for (const side of [...webhooks, fn]) {
      if ((side.otherCpuPercent ?? 0) >= 30) notes.push(`Other processes used ${side.otherCpuPercent}% CPU during the ${side.destination} drain: a noisy run.`);
    }
    const cpuOf = (sides: readonly Drain[]): number | undefined => {
      const values = sides.map((side) => side.cpuMicrosPerDelivery);
      return values.some((value) => value === undefined) ? undefined : Math.round(values.reduce<number>((sum, value) => sum + (value ?? 0), 0) / values.length);
    };
    const cpu = { function: fn.cpuMicrosPerDelivery, webhooks: cpuOf(webhooks) };
    return {
      description:
        `${JOBS} pending tracks drained through a function destination whose onTrack POSTs each with fetch to a bare node:http receiver, ` +
        'vs the same backlog drained by the Webhooks destination to the same receiver (before and after), each from Switchyard\'s start; ' +
        `rate from the ${Math.round(JOBS * EDGE_SHARE)}th to the ${JOBS - Math.round(JOBS * EDGE_SHARE)}th arrival`,
      metric: 'deliveries/s',
      ratio,
      target: TARGET,
      pass: ratio >= TARGET && fn.deliveredTotal >= JOBS,
      cpus: context.cpus.pinned
        ? `pinned: Switchyard (all threads) on CPU(s) ${context.cpus.server}, the receiver on CPU(s) ${context.cpus.loadGenerator}`
        : `unpinned: Switchyard and the receiver share ${context.cpus.available.length} CPU(s)`,
      jobs: JOBS,
      // Calls in flight at once in the function's isolate (the server reads the same environment).
      functionConcurrency: loadConfig({}, process.env).functionConcurrency,
      // The server's CPU, all threads, per delivery in the window (µs)…
      cpuMicrosPerDelivery: cpu,
      // …and their ratio (information): about the ratio on one core, where the isolate's thread has no CPU of its own.
      cpuRatio: cpu.function !== undefined && cpu.webhooks !== undefined && cpu.function > 0 ? round(cpu.webhooks / cpu.function, 3) : undefined,
      isolateHeapBytes: fn.isolateHeapBytes,
      function: fn,
      webhooks: { deliveriesPerSec: Math.round(webhookRate), rounds: webhooks },
      roundRatios: webhooks.map((side) => (side.deliveriesPerSec > 0 ? round(fn.deliveriesPerSec / side.deliveriesPerSec, 3) : 0)),
      notes,
    };
  } finally {
    await rig.close();
  }
}

export const functionBenches: readonly BenchDefinition[] = [{ name: 'function.throughput', run: runFunctionThroughput }];
