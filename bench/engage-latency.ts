/**
 * engage.latency: how long from a message's 200 to the identify its change
 * causes, at a receiver, under load:
 * `npm run build --silent && node dist/bench/engage-latency.js [--rate 1000] [--users 10000] [--seconds 20] [--store postgres]`.
 *
 * Starts `switchyard serve` as a child on a fresh store (SQLite temp dir, or
 * a scratch PostgreSQL database), a receiver in this process, defines the
 * 10 computed traits and 20 audiences of bench/engage-model.ts synced to the
 * source, then sends `rate` tracks a second (single calls, keep-alive) from
 * `users` users: Order Completed, Product Viewed and pages. Each user's
 * first order makes them enter `buyers`; the latency of that user is the
 * arrival of their `buyers: true` identify minus the 200 of that order.
 * Prints one JSON object: p50/p95/p99/max in ms, syncs received, the
 * send rate achieved and the server's peak RSS.
 * Not part of `npm run bench` (it has no baseline to compare with).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { ENGAGE_BENCH_SPECS } from './engage-model.js';
import { freePort } from './lib/free-port.js';
import { createScratchDatabase, type ScratchDatabase } from './lib/postgres-db.js';

const SWITCHYARD_BIN = fileURLToPath(new URL('../../bin/switchyard.js', import.meta.url));

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    users: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '20' },
    store: { type: 'string', default: 'sqlite' },
    /** Measure the same load without definitions (what the ingest path costs alone). */
    'no-definitions': { type: 'boolean', default: false },
    'postgres-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
  },
});
const RATE = Number(values.rate);
const USERS = Number(values.users);
const SECONDS = Number(values.seconds);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function peakRssMb(pid: number): number | undefined {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? undefined : Math.round(Number(match[1]) / 1024);
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  // The receiver: notes when each user's `buyers: true` arrives.
  const enteredAt = new Map<string, number>();
  /** When the evaluator queued each user's `buyers: true` (its receivedAt), wall clock. */
  const queuedAt = new Map<string, number>();
  const arrivedWall = new Map<string, number>();
  let syncs = 0;
  const receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const at = performance.now();
      try {
        const message = JSON.parse(body) as { type?: string; userId?: string; receivedAt?: string; traits?: Record<string, unknown>; context?: { personas?: unknown } };
        if (message.type === 'identify' && message.context?.personas !== undefined) {
          syncs++;
          if (message.traits?.['buyers'] === true && message.userId !== undefined && !enteredAt.has(message.userId)) {
            enteredAt.set(message.userId, at);
            queuedAt.set(message.userId, Date.parse(message.receivedAt ?? ''));
            arrivedWall.set(message.userId, Date.now());
          }
        }
      } catch {
        // not JSON: not ours
      }
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;

  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-engage-bench-'));
  let database: ScratchDatabase | undefined;
  if (values.store === 'postgres') database = await createScratchDatabase(values['postgres-url']);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const adminToken = randomBytes(16).toString('hex');
  const profiling = process.env['ENGAGE_BENCH_CPU_PROF'] === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', process.env['ENGAGE_BENCH_CPU_PROF']];
  const child = spawn(process.execPath, [...profiling, SWITCHYARD_BIN, 'serve'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_ADMIN_TOKEN: adminToken,
      SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database?.url ?? '',
    },
  });
  const admin = async (method: string, route: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${url}/admin/v1${route}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${route}: ${response.status} ${text.slice(0, 300)}`);
    return text === '' ? undefined : JSON.parse(text);
  };
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${url}/healthz`)).ok) break;
      } catch {
        // not listening yet
      }
      if (i > 200) throw new Error('switchyard did not start');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const source = (await admin('POST', '/sources', { name: 'bench' })) as { id: string; writeKey: string };
    await admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiverUrl }] } });
    for (const spec of values['no-definitions'] ? [] : ENGAGE_BENCH_SPECS) {
      await admin('POST', spec.kind === 'trait' ? '/computed-traits' : '/audiences', { name: spec.key, key: spec.key, definition: spec.definition, destinations: [source.id] });
    }
    for (;;) {
      const { audiences } = (await admin('GET', '/audiences')) as { audiences: Array<{ status: string }> };
      const { computedTraits } = (await admin('GET', '/computed-traits')) as { computedTraits: Array<{ status: string }> };
      if ([...audiences, ...computedTraits].every((a) => a.status === 'live')) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // Load: RATE single track calls a second, paced in 10 ms ticks.
    const pool = new Pool(url, { connections: 32, pipelining: 1 });
    const auth = `Basic ${Buffer.from(`${source.writeKey}:`).toString('base64')}`;
    const firstOrderAnsweredAt = new Map<string, number>();
    const answeredWall = new Map<string, number>();
    let sent = 0;
    let failed = 0;
    const inFlight = new Set<Promise<void>>();
    const startedAt = performance.now();
    const total = RATE * SECONDS;
    const sendOne = async (n: number): Promise<void> => {
      const userId = `user-${n % USERS}`;
      const kind = n % 4;
      const body =
        kind === 0
          ? { type: 'track', userId, event: 'Order Completed', properties: { revenue: (n % 300) + 1 } }
          : kind === 3
            ? { type: 'page', userId, properties: { utm_source: n % 2 === 0 ? 'google' : 'mail' } }
            : { type: 'track', userId, event: 'Product Viewed', properties: { sku: `sku-${n % 50}`, category: `cat-${n % 7}` } };
      try {
        const response = await pool.request({
          path: kind === 3 ? '/v1/page' : '/v1/track',
          method: 'POST',
          headers: { authorization: auth, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        await response.body.dump();
        const at = performance.now();
        if (response.statusCode !== 200) failed++;
        else if (kind === 0 && !firstOrderAnsweredAt.has(userId)) {
          firstOrderAnsweredAt.set(userId, at);
          answeredWall.set(userId, Date.now());
        }
      } catch {
        failed++;
      }
    };
    while (sent < total) {
      const due = Math.min(total, Math.floor(((performance.now() - startedAt) / 1000) * RATE));
      while (sent < due) {
        const promise = sendOne(sent++);
        inFlight.add(promise);
        void promise.finally(() => inFlight.delete(promise));
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await Promise.all(inFlight);
    const sendSeconds = (performance.now() - startedAt) / 1000;
    // Let the last syncs arrive.
    const waitUntil = performance.now() + 15_000;
    while (performance.now() < waitUntil && [...firstOrderAnsweredAt.keys()].some((u) => !enteredAt.has(u))) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await pool.close();
    const latencies = [...firstOrderAnsweredAt]
      .filter(([userId]) => enteredAt.has(userId))
      .map(([userId, answeredAt]) => Math.max(0, enteredAt.get(userId)! - answeredAt))
      .sort((a, b) => a - b);
    const round = (ms: number): number => Math.round(ms * 10) / 10;
    // Where the time goes: answered → queued by the evaluator, queued → at the receiver (wall clock, ms resolution).
    const measured = [...answeredWall.keys()].filter((u) => queuedAt.has(u));
    const evaluation = measured.map((u) => queuedAt.get(u)! - answeredWall.get(u)!).sort((a, b) => a - b);
    const delivery = measured.map((u) => arrivedWall.get(u)! - queuedAt.get(u)!).sort((a, b) => a - b);
    const summary = (values: number[]): Record<string, number> => ({ p50: round(percentile(values, 50)), p99: round(percentile(values, 99)) });
    process.stdout.write(
      `${JSON.stringify(
        {
          bench: 'engage.latency',
          store: values.store,
          computations: ENGAGE_BENCH_SPECS.length,
          users: USERS,
          targetRate: RATE,
          achievedRate: Math.round((sent - failed) / sendSeconds),
          non200: failed,
          measuredUsers: latencies.length,
          missingSyncs: firstOrderAnsweredAt.size - latencies.length,
          syncsReceived: syncs,
          latencyMs: { p50: round(percentile(latencies, 50)), p95: round(percentile(latencies, 95)), p99: round(percentile(latencies, 99)), max: round(latencies.at(-1) ?? Number.NaN) },
          answeredToQueuedMs: summary(evaluation),
          queuedToReceivedMs: summary(delivery),
          serverPeakRssMb: child.pid === undefined ? undefined : peakRssMb(child.pid),
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  }
}

await main();
