/**
 * Source A has a huge backlog, all due at once (as after a long outage), to
 * a receiver that answers in 100 ms; source B gets steady light load to a
 * healthy receiver. Issue 3: a slow receiver must not slow other sources.
 * Claims go oldest-due first, so B waits while A's backlog is spread out a
 * first time; after that B's messages must arrive promptly, A must keep
 * being served at its receiver's pace, nothing of B may be lost, and the
 * server must keep answering throughout (a busy delivery loop once starved
 * the event loop).
 */
import { makeTempDir, removeTempDir } from '../bench/lib/children.js';
import { freePort } from '../bench/lib/free-port.js';
import { DEDUPLICATION_WINDOW_MS } from '../src/domain/message.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { IngestEntry } from '../src/store/store.js';
import { HookReceiver } from './lib/hook-receiver.js';
import { check, round, type Scenario, sleep, summarize, verdictOf, waitUntil } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { createSource, startServer } from './lib/switchyard.js';

const SLOW_REPLY_MS = 100;
const B_RATE_PER_SEC = 20;
/** B's p99 once A's backlog has been spread fails above this. */
const SETTLED_P99_CEILING_MS = 250;
/** Any /healthz answer slower than this fails: the event loop was starved. */
const HEALTH_CEILING_MS = 1_000;
const PREFILL_CHUNK = 5_000;

export const backlogFairness: Scenario = {
  name: 'backlog-fairness',
  summary: `A: a large backlog, all due, to a receiver answering in ${SLOW_REPLY_MS} ms; B: ${B_RATE_PER_SEC} msg/s to a healthy one; B must not wait behind A`,
  timeoutSec: (quick) => (quick ? 120 : 300),
  async run({ quick, log, defer }) {
    const backlog = quick ? 200_000 : 1_000_000;
    const seconds = quick ? 40 : 120;
    const dataDir = makeTempDir('switchyard-chaos-fairness-');
    defer(() => removeTempDir(dataDir));
    const receiverA = await HookReceiver.start();
    defer(() => receiverA.close());
    await receiverA.setMode({ kind: 'slow', delayMs: SLOW_REPLY_MS });
    const receiverB = await HookReceiver.start();
    defer(() => receiverB.close());
    const port = await freePort();

    // Sources through the API, A's backlog straight into the store while no server runs.
    const setup = await startServer({ label: 'switchyard (setup)', dataDir, port });
    const sourceA = await createSource(setup.url, 'chaos-backlog', receiverA.url);
    const sourceB = await createSource(setup.url, 'chaos-fresh', receiverB.url);
    await setup.kill('SIGTERM');
    const prefillStarted = Date.now();
    await prefill(dataDir, sourceA.id, backlog);
    log(`prefilled ${backlog} deliveries for A in ${round((Date.now() - prefillStarted) / 1000, 1)} s`);

    const server = await startServer({ label: 'switchyard', dataDir, port });
    defer(() => server.kill());
    const started = Date.now();
    const sender = new PacedSender({ baseUrl: server.url, authorization: sourceB.authorization, ratePerSec: B_RATE_PER_SEC, idPrefix: 'fresh' });
    sender.start();
    defer(() => sender.stop());
    const health: number[] = [];
    while (Date.now() - started < seconds * 1000) {
      const probe = Date.now();
      const ok = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(10_000) }).then((r) => r.ok, () => false);
      health.push(ok ? Date.now() - probe : Infinity);
      await sleep(500);
      if (health.length % 20 === 0) log(`${round((Date.now() - started) / 1000, 0)} s: A got ${receiverA.posts} POSTs, B ${receiverB.arrivals.length} messages`);
    }
    await sender.stop();
    const acknowledged = [...sender.acknowledged];
    await waitUntil(() => receiverB.missing(acknowledged).length === 0, 15_000, 250);
    const lostB = receiverB.missing(acknowledged);

    // B's wait, by when it was sent: the worst of it, when it last exceeded the ceiling, and the last third alone.
    const waits = receiverB.arrivals.map((a) => ({ sentAt: a.sentAtMs - started, ms: a.arrivedAtMs - a.sentAtMs })).sort((x, y) => x.sentAt - y.sentAt);
    const lastSlow = waits.filter((w) => w.ms > SETTLED_P99_CEILING_MS).at(-1);
    const settledAfterSec = lastSlow === undefined ? 0 : round(lastSlow.sentAt / 1000, 1);
    const lastThird = summarize(waits.filter((w) => w.sentAt >= (seconds * 1000 * 2) / 3).map((w) => w.ms));
    const aPerSec = round(receiverA.posts / seconds, 0);
    const worstHealthMs = Math.max(...health);
    const figures = {
      backlog,
      seconds,
      bAcknowledged: acknowledged.length,
      bLost: lostB.length,
      bWaitMs: summarize(waits.map((w) => w.ms)),
      bSettledAfterSec: settledAfterSec,
      bWaitMsLastThird: lastThird,
      aPostsPerSec: aPerSec,
      aCapacityPerSec: Math.round((64 * 1000) / SLOW_REPLY_MS),
      healthzWorstMs: Number.isFinite(worstHealthMs) ? worstHealthMs : 'no answer',
      serverPeakRssMb: server.peakRssMb(),
    };
    return verdictOf(
      [
        check('all of B acknowledged', acknowledged.length === sender.sent, `${acknowledged.length}/${sender.sent} answered 200`),
        check('nothing of B lost', lostB.length === 0, `${lostB.length} of ${acknowledged.length} missing`),
        check("B prompt once A's backlog is spread", lastThird.count > 0 && lastThird.p99 <= SETTLED_P99_CEILING_MS, `p99 ${lastThird.p99} ms over the last third (${lastThird.count} messages); above ${SETTLED_P99_CEILING_MS} ms last for a message sent at ${settledAfterSec} s`),
        check('A served throughout', receiverA.posts > 0 && aPerSec >= figures.aCapacityPerSec / 4, `${aPerSec} POSTs/s to A (its receiver takes ${figures.aCapacityPerSec}/s at 64 in flight)`),
        check('server answered throughout', worstHealthMs <= HEALTH_CEILING_MS, `slowest /healthz ${figures.healthzWorstMs} ms of ${health.length} probes`),
      ],
      figures,
    );
  },
};

/** `count` accepted track messages for `sourceId`, each with a pending delivery, all received now. */
async function prefill(dataDir: string, sourceId: string, count: number): Promise<void> {
  const store = SqliteStore.open({ dataDir, durability: 'process' });
  try {
    await store.migrate();
    const receivedAt = Date.now();
    const body = JSON.stringify({ type: 'track', userId: 'u', event: 'Backlog', properties: { pad: 'x'.repeat(300) } });
    for (let done = 0; done < count; done += PREFILL_CHUNK) {
      const entries: IngestEntry[] = [];
      for (let n = done; n < Math.min(count, done + PREFILL_CHUNK); n++) {
        entries.push({ sourceId, status: 'accepted', type: 'track', messageId: `backlog-${n}`, userId: 'u', receivedAt, body, destinations: ['webhooks'] });
      }
      await store.appendMessages(entries, receivedAt - DEDUPLICATION_WINDOW_MS);
    }
  } finally {
    await store.close();
  }
}
