/**
 * `ingest.live`: `/v1/track` at saturation while every message is also
 * delivered, the way a user runs Switchyard (a source with a signed Webhooks
 * destination, the receiver a bare `node:http` server in its own process).
 * Against it, in the same run, a bare relay: `node:http` that parses,
 * answers 200 and POSTs on through an undici pool to the same kind of
 * receiver. Switchyard runs twice, with the background stages in their own
 * thread (the default on a machine with more than one core) and with
 * `--workers 0` (everything on one event loop, as before), so the gain of
 * the stage thread is measured in the same run too.
 *
 * CPUs: what this bench measures is the stage thread on a core of its own,
 * so the servers need two. When pinning leaves them two or more, the relay
 * and Switchyard alike run on the server CPUs and the receiver and wrk on
 * the load generator's. When it would leave them one (a 2-CPU machine),
 * the bench runs unpinned instead: every process, relay and Switchyard
 * alike, shares every CPU with the receiver and wrk. Pinned to one CPU, the
 * stage thread would share the ingest thread's core and the ratio would
 * measure the total CPU per message (reported anyway, as
 * `cpuMicrosPerMessage`), not the design. The report says which ran.
 *
 * `ingest.live.stores` (with `--store postgres`): the Switchyard side alone,
 * on the embedded store and on a scratch PostgreSQL database in the same
 * run, alternated; the ratio is PostgreSQL's rate over SQLite's.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { BenchContext, BenchDefinition, BenchReport, StoreKind } from './lib/bench-types.js';
import { spawnManaged } from './lib/children.js';
import { freePort } from './lib/free-port.js';
import { type LoadResult, type LoadSpec, runLoad } from './lib/http-load.js';
import { readProcessing } from './lib/processing-backlog.js';
import { mainThreadCpuSeconds } from './lib/proc-stats.js';
import { type Target, waitHealthy, watchChild } from './lib/target.js';

const RECEIVER_SCRIPT = fileURLToPath(new URL('./lib/live-receiver.js', import.meta.url));
const RELAY_SCRIPT = fileURLToPath(new URL('./lib/live-relay.js', import.meta.url));
export const BODY = JSON.stringify({ userId: 'bench-user', event: 'Order Completed', properties: { orderId: 'o-1', revenue: 42.5, currency: 'EUR' } });
/** `ingest.live.stores`: PostgreSQL's rate as a share of the embedded store's (issue 28). */
const STORES_TARGET = 0.5;
/** Bounds the wait for the last acknowledged message to reach the receiver. */
const DRAIN_TIMEOUT_MS = 180_000;

export interface SideResult {
  readonly label: string;
  readonly load: LoadResult;
  readonly acknowledged: number;
  /** From the end of the load to the last acknowledged message at the receiver. */
  readonly deliveryLagMs: number;
  readonly allDelivered: boolean;
  /** CPU of all threads of the server process, load and drain, per acknowledged message. */
  readonly cpuMicrosPerMessage: number;
  /**
   * CPU of the server's main thread during the load alone, per acknowledged
   * message: with a stage thread, ingest's own cost (what bounds the rate
   * once the later stages have cores of their own); with `--workers 0`, all
   * stages but what was left for the drain.
   */
  readonly mainThreadCpuMicrosPerMessage: number;
  /** Acknowledged messages not yet processed into messages when the load ended, and the oldest one's wait (Switchyard only). */
  readonly processingAtEnd?: { readonly unprocessed: number; readonly lagSec: number } | undefined;
  /** Longest event-loop delay of the ingest thread during the load (Switchyard only). */
  readonly ingestLoopMaxBlockMs?: number | undefined;
  /** With a transformation: its isolates' heap in use at the end, from `/metrics` (`switchyard_sandbox_heap_bytes`). */
  readonly sandboxHeapBytes?: number | undefined;
}

async function startScript(label: string, script: string, cpus: string | undefined, env: Record<string, string>): Promise<Target> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawnManaged(label, process.execPath, [script], { cpus, env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', ...env } });
  await waitHealthy(child, url, label);
  return watchChild(label, child, url, {});
}

export async function receivedBy(receiver: Target): Promise<number> {
  const response = await fetch(`${receiver.url}/count`, { signal: AbortSignal.timeout(10_000) });
  return ((await response.json()) as { received: number }).received;
}

/** The ingest thread's longest event-loop delay since the last scrape (prom-client resets it per scrape). */
export async function loopMaxMs(target: Target): Promise<number | undefined> {
  const text = await (await fetch(`${target.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const value = /^switchyard_nodejs_eventloop_lag_max_seconds\s+([\d.e+-]+)$/m.exec(text)?.[1];
  return value === undefined ? undefined : Number(value) * 1000;
}

async function processingNearEnd(server: Target): Promise<{ unprocessed: number; lagSec: number } | undefined> {
  const first = await readProcessing(server);
  await new Promise((resolve) => setTimeout(resolve, 250));
  const second = await readProcessing(server);
  if (first === undefined || second === undefined) return first ?? second;
  return { unprocessed: Math.max(first.unprocessed, second.unprocessed), lagSec: Math.max(first.lagSec, second.lagSec) };
}

export async function waitDelivered(receiver: Target, expected: number): Promise<boolean> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if ((await receivedBy(receiver)) >= expected) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return false;
}

/** The sum of `switchyard_sandbox_heap_bytes` of `kind` in the server's `/metrics`; undefined when it has none. */
export async function sandboxHeapBytes(target: Target, kind: 'transformation' | 'function'): Promise<number | undefined> {
  const text = await (await fetch(`${target.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  let total: number | undefined;
  for (const match of text.matchAll(new RegExp(`^switchyard_sandbox_heap_bytes\\{[^}]*kind="${kind}"[^}]*\\}\\s+([\\d.e+-]+)$`, 'gm'))) total = (total ?? 0) + Number(match[1]);
  return total;
}

export async function withEnv<T>(env: Record<string, string>, start: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  try {
    return await start();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/**
 * How one side runs beyond its workers: `env` added to its environment
 * (e.g. the `OTEL_*` variables of `otel.overhead`), `plan` a tracking plan
 * put on the source before the load (`plan.overhead`), `transformation` the
 * code of a transformation created and attached to the Webhooks
 * destination (`transform.live`).
 */
export interface SideOptions {
  readonly env?: Record<string, string>;
  readonly plan?: unknown;
  readonly transformation?: string;
}

/** Creates a transformation on `server`; resolves its id. */
async function createTransformation(server: Target, label: string, code: string): Promise<string> {
  const admin = server.admin!;
  const created = await fetch(`${server.url}/admin/v1/transformations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', code }),
  });
  if (created.status !== 201) throw new Error(`${label}: creating the transformation answered ${created.status}: ${await created.text()}`);
  return ((await created.json()) as { id: string }).id;
}

/**
 * One side of the bench: the bare relay (`workers` undefined) or Switchyard
 * with that many stage threads (see {@link SideOptions}).
 */
export async function measure(context: BenchContext, label: string, workers: string | undefined, side: SideOptions = {}): Promise<SideResult> {
  const { options } = context;
  const { receiver, server, spec, stop } = await startSide(context, label, workers, side);
  const { transformation } = side;
  try {
    context.log(`${label}: warm-up ${options.warmupSec}s`);
    const warm = await runLoad({ ...spec, durationSec: Math.max(1, options.warmupSec) });
    await waitDelivered(receiver, warm.requests - warm.non2xx);
    const before = await receivedBy(receiver);
    const cpuBefore = server.cpuSeconds() ?? NaN;
    const mainThreadBefore = mainThreadCpuSeconds(server.pid) ?? NaN;
    if (workers !== undefined) await loopMaxMs(server);
    context.log(`${label}: ${options.durationSec}s at saturation, ${options.connections} connections`);
    const load = await runLoad({ ...spec, durationSec: options.durationSec });
    const loadEnd = Date.now();
    const mainThreadCpu = (mainThreadCpuSeconds(server.pid) ?? NaN) - mainThreadBefore;
    const ingestLoopMaxBlockMs = workers === undefined ? undefined : await loopMaxMs(server);
    // Ingest reads the backlog every 200 ms: one reading now, one surely from after the load's end; the larger counts.
    const processingAtEnd = workers === undefined ? undefined : await processingNearEnd(server);
    const acknowledged = load.requests - load.non2xx;
    const allDelivered = await waitDelivered(receiver, before + acknowledged);
    const deliveryLagMs = Date.now() - loadEnd;
    const cpu = (server.cpuSeconds() ?? NaN) - cpuBefore;
    const heap = transformation === undefined ? undefined : await sandboxHeapBytes(server, 'transformation');
    const failure = server.failure();
    if (failure !== undefined) throw new Error(`${label}: ${failure}`);
    context.log(`${label}: ${load.requestsPerSec.toFixed(0)} req/s, p99 ${load.p99Ms.toFixed(1)} ms, lag ${deliveryLagMs} ms (${load.generator})`);
    if (processingAtEnd !== undefined) context.log(`${label}: ${processingAtEnd.unprocessed} acknowledged messages unprocessed at the end of the load, the oldest ${processingAtEnd.lagSec.toFixed(1)} s old`);
    return { label, load, acknowledged, deliveryLagMs, allDelivered, cpuMicrosPerMessage: (cpu * 1e6) / Math.max(1, acknowledged),
      mainThreadCpuMicrosPerMessage: (mainThreadCpu * 1e6) / Math.max(1, acknowledged),
      ingestLoopMaxBlockMs, processingAtEnd, sandboxHeapBytes: heap };
  } finally {
    await stop();
  }
}

/** One side's processes, running and configured, ready for load. */
export interface StartedSide {
  readonly receiver: Target;
  readonly server: Target;
  /** The load every phase of the side puts on the server (`durationSec` to add). */
  readonly spec: Omit<LoadSpec, 'durationSec'>;
  readonly stop: () => Promise<void>;
}

/**
 * Starts one side: the receiver in its own process, then the bare relay
 * (`workers` undefined) or Switchyard with that many stage threads and a
 * signed Webhooks destination to the receiver (see {@link SideOptions}).
 */
export async function startSide(context: BenchContext, label: string, workers: string | undefined, side: SideOptions = {}): Promise<StartedSide> {
  const { env = {}, plan, transformation } = side;
  const { options, cpus } = context;
  // The receiver stands for a remote system: it runs beside the load generator, never on the server's CPU.
  const receiver = await startScript(`${label} receiver`, RECEIVER_SCRIPT, cpus.loadGenerator, {});
  let server: Target | undefined;
  try {
    const hook = `${receiver.url}/hook`;
    if (workers === undefined) {
      server = await startScript(label, RELAY_SCRIPT, cpus.server, { RECEIVER_URL: hook });
    } else {
      server = await withEnv({ SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true', SWITCHYARD_WORKERS: workers, ...env }, () => context.startSwitchyard(label));
      const admin = server.admin!;
      const attached = transformation === undefined ? {} : { transformation: { id: await createTransformation(server, label, transformation) } };
      const response = await fetch(`${server.url}/admin/v1/sources/${admin.sourceId}/destinations/webhooks`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ enabled: true, settings: { webhooks: [{ url: hook }], sharedSecret: 'bench-shared-secret-0123456789', ...attached } }),
      });
      if (response.status !== 200) throw new Error(`${label}: setting the destination answered ${response.status}`);
      if (plan !== undefined) {
        const put = await fetch(`${server.url}/admin/v1/sources/${admin.sourceId}/tracking-plan`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
          body: JSON.stringify(plan),
        });
        if (put.status !== 200) throw new Error(`${label}: setting the tracking plan answered ${put.status}: ${await put.text()}`);
      }
    }
    const spec = { url: `${server.url}/v1/track`, headers: server.headers, body: BODY, connections: options.connections, cpus: cpus.loadGenerator };
    const started = server;
    return { receiver, server, spec, stop: async () => {
      await started.stop();
      await receiver.stop();
    } };
  } catch (error) {
    await server?.stop();
    await receiver.stop();
    throw error;
  }
}

export const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;

export function summary(side: SideResult): Record<string, unknown> {
  return {
    requestsPerSec: round(side.load.requestsPerSec, 0),
    p99Ms: round(side.load.p99Ms, 1),
    acknowledged: side.acknowledged,
    non2xx: side.load.non2xx,
    deliveryLagMs: side.deliveryLagMs,
    allDelivered: side.allDelivered,
    cpuMicrosPerMessage: round(side.cpuMicrosPerMessage, 0),
    mainThreadCpuMicrosPerMessage: round(side.mainThreadCpuMicrosPerMessage, 0),
    ...(side.ingestLoopMaxBlockMs === undefined ? {} : { ingestLoopMaxBlockMs: round(side.ingestLoopMaxBlockMs, 1) }),
    ...(side.processingAtEnd === undefined ? {} : { unprocessedAtEnd: side.processingAtEnd.unprocessed, processingLagAtEndSec: round(side.processingAtEnd.lagSec, 1) }),
  };
}

/** `--workers` for Switchyard with its stage thread, as `serve` picks by default on this machine (cores - 1, at least 1). */
export function stageThreadWorkers(): string {
  return String(Math.max(1, availableParallelism() - 1));
}

/**
 * The context to measure in: pinned only when the servers get two CPUs or
 * more (see the top of this file). `bench` and `leftWithout` name the bench
 * and the thread that one CPU would leave without a core, for the log.
 */
export function serversGetTwoCpus(context: BenchContext, bench = 'ingest.live', leftWithout = 'the stage thread'): BenchContext {
  const serverCpus = context.cpus.server?.split(',').length;
  if (!context.cpus.pinned || serverCpus === undefined || serverCpus >= 2) return context;
  context.log(`${bench}: pinning would leave the servers ${serverCpus} CPU, ${leftWithout} no core of its own: running unpinned`);
  return context.unpinned();
}

export const liveBenches: readonly BenchDefinition[] = [
  {
    name: 'ingest.live',
    async run(pinnedContext): Promise<BenchReport> {
      const context = serversGetTwoCpus(pinnedContext);
      const relay = await measure(context, 'bare relay', undefined);
      const threaded = await measure(context, 'switchyard (stage thread)', stageThreadWorkers());
      const single = await measure(context, 'switchyard (--workers 0)', '0');
      const ratio = threaded.load.requestsPerSec / relay.load.requestsPerSec;
      const p99VsRelay = threaded.load.p99Ms / relay.load.p99Ms;
      return {
        description: '/v1/track at saturation with a signed Webhooks destination delivering, vs a bare relay (parse, 200, POST on)',
        metric: 'requests/s',
        ratio: round(ratio, 3),
        target: 0.6,
        pass: ratio >= 0.6 && p99VsRelay <= 2 && threaded.allDelivered,
        loadGenerator: relay.load.generator,
        cpus: context.cpus.pinned
          ? `pinned: relay and Switchyard (both threads) on CPU(s) ${context.cpus.server}, receiver and load generator on CPU(s) ${context.cpus.loadGenerator}`
          : `unpinned: every process shares ${context.cpus.available.length} CPU(s)`,
        p99VsRelay: round(p99VsRelay, 2),
        p99Target: '≤ 2× the relay',
        singleThreadRatio: round(single.load.requestsPerSec / relay.load.requestsPerSec, 3),
        relay: summary(relay),
        switchyard: summary(threaded),
        switchyardWorkers0: summary(single),
      };
    },
  },
  {
    // Issue 28's third target, in one run: the two stores of the same build, alternated.
    name: 'ingest.live.stores',
    stores: ['postgres'],
    async run(pinnedContext): Promise<BenchReport> {
      const context = serversGetTwoCpus(pinnedContext);
      const workers = stageThreadWorkers();
      const sides: Record<StoreKind, SideResult[]> = { sqlite: [], postgres: [] };
      // ABBA, each phase a fresh server on a fresh store, so that drift lands on both stores alike.
      for (const store of ['sqlite', 'postgres', 'postgres', 'sqlite'] as const) {
        sides[store].push(await measure(context.onStore(store), `switchyard on ${store} (${sides[store].length + 1})`, workers));
      }
      const rate = (results: readonly SideResult[]): number => results.reduce((sum, side) => sum + side.load.requestsPerSec, 0) / results.length;
      const ratio = rate(sides.postgres) / rate(sides.sqlite);
      const allDelivered = [...sides.sqlite, ...sides.postgres].every((side) => side.allDelivered);
      return {
        description: 'ingest.live\'s Switchyard side (stage thread, a signed Webhooks destination delivering) on PostgreSQL against the same on the embedded store, alternated SQLite, PostgreSQL, PostgreSQL, SQLite in one run',
        metric: 'requests/s',
        ratio: round(ratio, 3),
        target: STORES_TARGET,
        pass: ratio >= STORES_TARGET && allDelivered,
        loadGenerator: sides.sqlite[0]!.load.generator,
        cpus: context.cpus.pinned
          ? `pinned: Switchyard (both threads) on CPU(s) ${context.cpus.server}, receiver and load generator on CPU(s) ${context.cpus.loadGenerator}; PostgreSQL unpinned`
          : `unpinned: every process shares ${context.cpus.available.length} CPU(s), PostgreSQL's too`,
        roundRatios: sides.postgres.map((side, i) => round(side.load.requestsPerSec / sides.sqlite[i]!.load.requestsPerSec, 3)),
        // The means the ratio divides, as the report reads a bench's two sides.
        postgresMean: { requestsPerSec: round(rate(sides.postgres), 0) },
        sqliteMean: { requestsPerSec: round(rate(sides.sqlite), 0) },
        sqlite: sides.sqlite.map(summary),
        postgres: sides.postgres.map(summary),
      };
    },
  },
];
