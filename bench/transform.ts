/**
 * Transformations (issue 24):
 *
 * - `transform.live`: `ingest.live` (`/v1/track` at saturation, a signed
 *   Webhooks destination delivering) with a small transformation attached
 *   (it adds one property), against the same without it, in the same run:
 *   ≥ 0.85. Every message runs in the transformation's isolate before its
 *   delivery. The CPU per message the transformation adds (the transformed
 *   side's less the plain side's) is reported as
 *   `transformCpuMicrosPerMessage`, and the isolate's heap in use at the
 *   end of the load as `isolateHeapBytes` (`switchyard_sandbox_heap_bytes`).
 * - `transform.first-call` (informational): the time from saving a new
 *   version of an attached transformation (`PUT /transformations/:id`, the
 *   destination following the latest) to the first message transformed by
 *   it at the receiver, with tracks sent every 10 ms meanwhile; a few
 *   rounds, median and max.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { measure, round, serversGetTwoCpus, summary, withEnv } from './live.js';

const TARGET = 0.85;

/** The issue's "small transformation": one property added, RudderStack's code shape. */
const ADD_ONE_PROPERTY = `export function transformEvent(event, metadata) {
  event.properties = event.properties || {};
  event.properties.transformedBy = 'switchyard-bench';
  return event;
}`;

const FIRST_CALL_ROUNDS = 5;
const FIRST_CALL_SEND_EVERY_MS = 10;
/** A round that has not seen its version by then is reported as such. */
const FIRST_CALL_TIMEOUT_MS = 30_000;

/** Version `n` of the first-call bench's transformation: it marks what it transformed with its number. */
function versionCode(n: number): string {
  return `export function transformEvent(event) {
  event.properties = event.properties || {};
  event.properties.benchVersion = ${n};
  return event;
}`;
}

async function runLive(pinnedContext: BenchContext): Promise<BenchReport> {
  const context = serversGetTwoCpus(pinnedContext);
  const workers = String(Math.max(1, availableParallelism() - 1));
  const plain = await measure(context, 'switchyard (no transformation)', workers);
  const transformed = await measure(context, 'switchyard (transformation attached)', workers, { transformation: ADD_ONE_PROPERTY });
  const ratio = transformed.load.requestsPerSec / plain.load.requestsPerSec;
  return {
    description: 'ingest.live with a transformation that adds one property attached to the Webhooks destination vs the same without it',
    metric: 'requests/s',
    ratio: round(ratio, 3),
    target: TARGET,
    pass: ratio >= TARGET && transformed.allDelivered,
    transformCpuMicrosPerMessage: round(transformed.cpuMicrosPerMessage - plain.cpuMicrosPerMessage, 1),
    isolateHeapBytes: transformed.sandboxHeapBytes,
    cpus: context.cpus.pinned ? `pinned: Switchyard on CPU(s) ${context.cpus.server}` : `unpinned: every process shares ${context.cpus.available.length} CPU(s)`,
    withoutTransformation: summary(plain),
    transformed: summary(transformed),
  };
}

/** A receiver in this process that notes when each `benchVersion` first arrived (performance.now()). */
async function versionReceiver(): Promise<{ url: string; firstAt: Map<number, number>; close: () => Promise<void> }> {
  const firstAt = new Map<number, number>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = performance.now();
      try {
        const version = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { properties?: { benchVersion?: unknown } }).properties?.benchVersion;
        if (typeof version === 'number' && !firstAt.has(version)) firstAt.set(version, at);
      } catch {
        // Not a bench message: counted for nothing.
      }
      response.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    firstAt,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function runFirstCall(context: BenchContext): Promise<BenchReport> {
  const receiver = await versionReceiver();
  const server = await withEnv({ SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true' }, () => context.startSwitchyard('switchyard (transform.first-call)'));
  try {
    const admin = server.admin!;
    const call = async (method: string, path: string, body: unknown, expect: number): Promise<Record<string, unknown>> => {
      const response = await fetch(`${server.url}/admin/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await response.text();
      if (response.status !== expect) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 300)}`);
      return JSON.parse(text) as Record<string, unknown>;
    };
    const created = await call('POST', '/transformations', { name: 'first-call', code: versionCode(1) }, 201);
    const id = String(created['id']);
    await call('PUT', `/sources/${admin.sourceId}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }], transformation: { id } } }, 200);
    let sent = 0;
    const send = async (): Promise<void> => {
      const response = await fetch(`${server.url}/v1/track`, {
        method: 'POST',
        headers: { ...server.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ userId: 'bench-user', event: 'First Call', properties: { n: ++sent } }),
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
    };
    /** Sends a track every FIRST_CALL_SEND_EVERY_MS until version `n` has arrived; resolves when it did (performance.now()). */
    const until = async (n: number, started: number): Promise<number | undefined> => {
      while (!receiver.firstAt.has(n) && performance.now() - started < FIRST_CALL_TIMEOUT_MS) {
        await send();
        await new Promise((resolve) => setTimeout(resolve, FIRST_CALL_SEND_EVERY_MS));
      }
      return receiver.firstAt.get(n);
    };
    // Version 1's isolate is loaded and the pipeline warm before anything is timed.
    if ((await until(1, performance.now())) === undefined) throw new Error('version 1 never reached the receiver');

    const rounds: Array<number | null> = [];
    for (let n = 2; n < 2 + FIRST_CALL_ROUNDS; n++) {
      const started = performance.now();
      await call('PUT', `/transformations/${id}`, { code: versionCode(n) }, 200);
      const arrived = await until(n, started);
      rounds.push(arrived === undefined ? null : round(arrived - started, 1));
      context.log(`transform.first-call: version ${n}: ${arrived === undefined ? 'never arrived' : `${round(arrived - started, 1)} ms`}`);
    }
    const measured = rounds.filter((ms): ms is number => ms !== null).sort((a, b) => a - b);
    const median = measured.length === 0 ? undefined : measured[Math.floor((measured.length - 1) / 2)];
    const max = measured.length === 0 ? undefined : measured[measured.length - 1];
    return {
      description:
        'time from saving a new version of the transformation attached (latest) to the Webhooks destination to the first message it transformed at the receiver, ' +
        `with a track sent every ${FIRST_CALL_SEND_EVERY_MS} ms; ${FIRST_CALL_ROUNDS} versions in a row, after a warm-up on version 1`,
      metric: 'ms from PUT to the first transformed message at the receiver',
      informational: true,
      // No baseline: the "ratio" is the median in ms (the report shows it in this bench's section only).
      ratioKind: 'value',
      ratio: median ?? 0,
      firstCallMs: { median, max, rounds },
      tracksSent: sent,
      notes: rounds.includes(null) ? [`A version did not reach the receiver within ${FIRST_CALL_TIMEOUT_MS / 1000} s.`] : [],
    };
  } finally {
    await server.stop();
    await receiver.close();
  }
}

export const transformBenches: readonly BenchDefinition[] = [
  { name: 'transform.live', run: runLive },
  { name: 'transform.first-call', run: runFirstCall },
];
