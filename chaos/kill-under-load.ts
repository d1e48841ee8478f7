/**
 * kill -9 of the server under steady load, again and again, restarting it on
 * the same data dir: every acknowledged (200) message must reach the
 * webhook receiver at least once. Duplicates are allowed (at-least-once)
 * and reported.
 */
import { makeTempDir, removeTempDir } from '../bench/lib/children.js';
import { freePort } from '../bench/lib/free-port.js';
import { HookReceiver } from './lib/hook-receiver.js';
import { check, round, type Scenario, sleep, verdictOf, waitUntil } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { createSource, type Server, startServer } from './lib/switchyard.js';

const RATE_PER_SEC = 300;
const SERVER_ENV = {
  SWITCHYARD_RETRY_BASE_MS: '50',
  SWITCHYARD_RETRY_MAX_DELAY_MS: '1000',
  SWITCHYARD_DELIVERY_TIMEOUT_MS: '2000',
};

export const killUnderLoad: Scenario = {
  name: 'kill-under-load',
  summary: `kill -9 the server every 2-4 s under ${RATE_PER_SEC} msg/s, restart on the same data dir; every 200 must reach the receiver`,
  timeoutSec: (quick) => (quick ? 75 : 240),
  async run({ quick, log, defer }) {
    const kills = quick ? 3 : 20;
    const drainTimeoutMs = quick ? 30_000 : 60_000;
    const dataDir = makeTempDir('switchyard-chaos-kill-');
    defer(() => removeTempDir(dataDir));
    const receiver = await HookReceiver.start();
    defer(() => receiver.close());
    const port = await freePort();
    let server: Server | undefined = await startServer({ label: 'switchyard', dataDir, port, env: SERVER_ENV });
    defer(() => server?.kill());
    const source = await createSource(server.url, 'chaos-kill', receiver.url);
    log(`server on ${server.url}, data dir ${dataDir}, receiver ${receiver.url}`);

    const sender = new PacedSender({ baseUrl: server.url, authorization: source.authorization, ratePerSec: RATE_PER_SEC, idPrefix: 'kill', timeoutMs: 5000 });
    sender.start();
    defer(() => sender.stop());
    const restartMs: number[] = [];
    for (let kill = 1; kill <= kills; kill++) {
      await sleep(2000 + Math.random() * 2000);
      await server.kill('SIGKILL');
      const acked = sender.acknowledged.size;
      const started = Date.now();
      server = await startServer({ label: 'switchyard', dataDir, port, env: SERVER_ENV });
      restartMs.push(Date.now() - started);
      log(`kill ${kill}/${kills}: killed with ${acked} acknowledged so far, ${receiver.seen.size} delivered; restarted in ${Date.now() - started} ms`);
    }
    await sleep(2000);
    await sender.stop();
    const acknowledged = [...sender.acknowledged];
    log(`load stopped: ${sender.sent} sent, ${acknowledged.length} acknowledged; waiting up to ${drainTimeoutMs / 1000} s for delivery`);
    const drainStarted = Date.now();
    const drained = await waitUntil(() => receiver.missing(acknowledged).length === 0, drainTimeoutMs, 250);
    const drainSec = round((Date.now() - drainStarted) / 1000, 1);

    const lost = receiver.missing(acknowledged);
    let deliveriesOfAcked = 0;
    for (const id of acknowledged) deliveriesOfAcked += receiver.accepted.get(id) ?? 0;
    const delivered = acknowledged.length - lost.length;
    // The receiver answers 200 to all: every POST of a messageId beyond its first is a duplicate.
    const duplicates = deliveriesOfAcked - delivered;
    const unacknowledgedDelivered = [...receiver.seen.keys()].filter((id) => !sender.acknowledged.has(id)).length;
    const figures = {
      kills,
      ratePerSec: RATE_PER_SEC,
      sent: sender.sent,
      acknowledged: acknowledged.length,
      failedRequests: sender.count('error'),
      non200: Object.entries(sender.statuses).filter(([status]) => status !== '200' && status !== 'error'),
      skippedSlots: sender.skipped,
      delivered,
      lost: lost.length,
      lostSample: lost.slice(0, 5),
      duplicates,
      duplicateRate: delivered === 0 ? 0 : round(duplicates / delivered, 4),
      deliveredWithoutAck: unacknowledgedDelivered,
      drainSec,
      restartMs: { max: Math.max(...restartMs), mean: Math.round(restartMs.reduce((a, b) => a + b, 0) / restartMs.length) },
      receiverPosts: receiver.posts,
    };
    return verdictOf(
      [
        check('enough load', acknowledged.length >= kills * 300, `${acknowledged.length} acknowledged (want >= ${kills * 300})`),
        check('no acknowledged message lost', lost.length === 0, `${lost.length} of ${acknowledged.length} never reached the receiver${drained ? '' : ` within ${drainTimeoutMs / 1000} s`}`),
      ],
      figures,
    );
  },
};
