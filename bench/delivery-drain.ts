/**
 * The delivery worker's own cost, without `serve` around it: the real
 * `DeliveryWorker` on a real embedded store drains a prefilled backlog of
 * signed Webhooks deliveries to the benches' receiver
 * (lib/delivery-receiver.ts) in another process, and prints CPU per
 * delivery with the garbage collector's share, by kind. A tool for changes
 * to src/delivery (as function-calls.ts is for the sandbox), not a bench
 * with a target; `delivery.throughput` is the figure users see. Its drain
 * matched that bench's Switchyard side within a few µs of CPU per delivery
 * on 2026-11-28.
 *
 *   taskset -c 0 node dist/bench/delivery-drain.js [--jobs N] [--receiver-cpu C]
 *
 * Pin it to one CPU as `npm run bench` pins the server; the receiver is
 * pinned to `--receiver-cpu` (default 1). Run it a few times and alternate
 * the builds compared: from run to run the drain lands in a low or a high
 * garbage regime (docs/performance.md), so one run says little. Add
 * `--trace-gc-nvp` before the script to see what each young collection
 * promotes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type PerformanceEntry, PerformanceObserver, constants } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { DeliveryWorker } from '../src/delivery/delivery-worker.js';
import { webhookDestination } from '../src/domain/webhook-settings.js';
import { Metrics } from '../src/metrics.js';
import type { SourceRecord } from '../src/store/records.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { appendBacklog, entryMaker } from './lib/delivery-bodies.js';
import { Receiver } from './lib/delivery-receiver-client.js';

const { values } = parseArgs({ options: { jobs: { type: 'string', default: '100000' }, 'receiver-cpu': { type: 'string', default: '1' } } });
const JOBS = Math.max(10_000, Number(values.jobs) || 100_000);
/** How often the drain is checked for its end. */
const POLL_MS = 100;
/** The whole drain, bounded: a stuck one ends the run. */
const DRAIN_TIMEOUT_MS = 300_000;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-delivery-drain-'));
  const store = SqliteStore.open({ dataDir, durability: 'process' });
  const receiver = await Receiver.start(values['receiver-cpu']);
  try {
    await store.migrate();
    const source: SourceRecord = { id: 'src_drain', name: 'drain', writeKey: 'drain-write-key', enabled: true, createdAt: 0, updatedAt: 0 };
    await store.insertSource(source);
    const receivedAt = Date.now();
    const makeEntries = entryMaker(source, { idPrefix: 'drain', receivedAt });
    await appendBacklog(store, makeEntries, JOBS, receivedAt);

    const destination = webhookDestination({ enabled: true, settings: { webhooks: [{ url: receiver.hookUrl }], sharedSecret: 'drain-secret' } });
    const worker = new DeliveryWorker({
      store,
      destination: () => destination,
      settings: { deliveryTimeoutMs: 10_000, retryWindowMs: 3_600_000, retryBaseMs: 1_000, retryMaxDelayMs: 60_000, userAgent: 'Switchyard/drain', allowPrivateReceivers: true },
      logger: pino({ level: 'warn' }),
      metrics: new Metrics(),
    });

    const gc = new Map<string, { count: number; ms: number }>();
    const kinds: Record<number, string> = {
      [constants.NODE_PERFORMANCE_GC_MINOR]: 'young',
      [constants.NODE_PERFORMANCE_GC_MAJOR]: 'full',
      [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
      [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
    };
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const kind = kinds[(entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
        const seen = gc.get(kind) ?? { count: 0, ms: 0 };
        gc.set(kind, { count: seen.count + 1, ms: seen.ms + entry.duration });
      }
    });
    observer.observe({ entryTypes: ['gc'] });

    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    await worker.start();
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      if ((await store.nextDeliveryDueAt()) === undefined) break;
      if (performance.now() - started > DRAIN_TIMEOUT_MS) throw new Error(`the drain did not end within ${DRAIN_TIMEOUT_MS / 1000} s`);
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    observer.disconnect();
    await worker.stop();

    const perDelivery = (ms: number): number => Math.round((ms * 1000 * 10) / JOBS) / 10;
    let gcMs = 0;
    for (const { ms } of gc.values()) gcMs += ms;
    process.stdout.write(
      `${JSON.stringify(
        {
          jobs: JOBS,
          deliveriesPerSec: Math.round(JOBS / seconds),
          cpuMicrosPerDelivery: Math.round((cpu.user + cpu.system) / JOBS),
          gcMicrosPerDelivery: perDelivery(gcMs),
          gc: Object.fromEntries([...gc].map(([kind, { count, ms }]) => [kind, { count, msEach: Math.round((ms / count) * 10) / 10 }])),
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await receiver.stop();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
