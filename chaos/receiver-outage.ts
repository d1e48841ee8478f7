/**
 * Source A's receiver goes down (port closed), then slow (answers after the
 * delivery timeout), then flaps between 200 and 503, then recovers; source
 * B's receiver stays healthy; both sources get constant load throughout.
 * Nothing acknowledged on A may be lost once its backlog has drained, and
 * B must not be slowed by A's trouble.
 */
import { makeTempDir, removeTempDir } from '../bench/lib/children.js';
import { freePort } from '../bench/lib/free-port.js';
import { type Arrival, HookReceiver, type ReceiverMode } from './lib/hook-receiver.js';
import { check, type Latencies, round, type Scenario, sleep, summarize, verdictOf, waitUntil } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { createSource, startServer } from './lib/switchyard.js';

const RATE_PER_SEC = 100;
const DELIVERY_TIMEOUT_MS = 500;
const SLOW_REPLY_MS = 800;
/** B's p99 during A's trouble fails above this … */
const P99_CEILING_MS = 250;
/** … or above this many times its p99 before, unless the difference is below NOISE_FLOOR_MS. */
const P99_FACTOR = 5;
const NOISE_FLOOR_MS = 50;

interface Phase {
  readonly name: string;
  readonly mode: ReceiverMode;
  readonly seconds: number;
}

export const receiverOutage: Scenario = {
  name: 'receiver-outage',
  summary: `A's receiver down, then slow (> ${DELIVERY_TIMEOUT_MS} ms timeout), then flapping 200/503; B healthy; ${RATE_PER_SEC} msg/s on each`,
  timeoutSec: (quick) => (quick ? 85 : 200),
  async run({ quick, log, defer }) {
    const s = (quickSec: number, fullSec: number): number => (quick ? quickSec : fullSec);
    const phases: Phase[] = [
      { name: 'before', mode: { kind: 'healthy' }, seconds: s(6, 15) },
      { name: 'down', mode: { kind: 'down' }, seconds: s(6, 20) },
      { name: 'slow', mode: { kind: 'slow', delayMs: SLOW_REPLY_MS }, seconds: s(6, 15) },
      { name: 'flapping', mode: { kind: 'flapping' }, seconds: s(6, 15) },
      { name: 'recovered', mode: { kind: 'healthy' }, seconds: s(3, 5) },
    ];
    const drainTimeoutMs = s(30, 90) * 1000;

    const dataDir = makeTempDir('switchyard-chaos-outage-');
    defer(() => removeTempDir(dataDir));
    const receiverA = await HookReceiver.start();
    defer(() => receiverA.close());
    const receiverB = await HookReceiver.start();
    defer(() => receiverB.close());
    const server = await startServer({
      label: 'switchyard',
      dataDir,
      port: await freePort(),
      env: { SWITCHYARD_DELIVERY_TIMEOUT_MS: String(DELIVERY_TIMEOUT_MS), SWITCHYARD_RETRY_BASE_MS: '100', SWITCHYARD_RETRY_MAX_DELAY_MS: '2000' },
    });
    defer(() => server.kill());
    const sourceA = await createSource(server.url, 'chaos-a', receiverA.url);
    const sourceB = await createSource(server.url, 'chaos-b', receiverB.url);
    log(`server ${server.url}; A → ${receiverA.url}, B → ${receiverB.url}; SWITCHYARD_DELIVERY_TIMEOUT_MS=${DELIVERY_TIMEOUT_MS}`);

    const senderA = new PacedSender({ baseUrl: server.url, authorization: sourceA.authorization, ratePerSec: RATE_PER_SEC, idPrefix: 'a' });
    const senderB = new PacedSender({ baseUrl: server.url, authorization: sourceB.authorization, ratePerSec: RATE_PER_SEC, idPrefix: 'b' });
    senderA.start();
    senderB.start();
    defer(() => senderA.stop());
    defer(() => senderB.stop());

    const windows: Array<{ name: string; from: number; to: number; postsToA: number; answeredA: Record<string, number> }> = [];
    for (const phase of phases) {
      await receiverA.setMode(phase.mode);
      const from = Date.now();
      const postsBefore = receiverA.posts;
      const answeredBefore = { ...receiverA.answered };
      log(`phase ${phase.name}: A's receiver ${describeMode(phase.mode)} for ${phase.seconds} s`);
      await sleep(phase.seconds * 1000);
      const answered: Record<string, number> = {};
      for (const [status, n] of Object.entries(receiverA.answered)) answered[status] = n - (answeredBefore[status] ?? 0);
      windows.push({ name: phase.name, from, to: Date.now(), postsToA: receiverA.posts - postsBefore, answeredA: answered });
    }
    await senderA.stop();
    await senderB.stop();
    const ackedA = [...senderA.acknowledged];
    const ackedB = [...senderB.acknowledged];
    log(`load stopped: A ${ackedA.length} acknowledged, B ${ackedB.length}; waiting up to ${drainTimeoutMs / 1000} s for A's backlog (${receiverA.missing(ackedA).length} missing)`);
    const drainStarted = Date.now();
    await waitUntil(() => receiverA.missing(ackedA).length === 0 && receiverB.missing(ackedB).length === 0, drainTimeoutMs, 250);
    const drainSec = round((Date.now() - drainStarted) / 1000, 1);
    const lostA = receiverA.missing(ackedA);
    const lostB = receiverB.missing(ackedB);

    const latencyOf = (arrivals: readonly Arrival[], from: number, to: number): Latencies =>
      summarize(arrivals.filter((a) => a.sentAtMs >= from && a.sentAtMs < to).map((a) => a.arrivedAtMs - a.sentAtMs));
    const byPhase: Record<string, Latencies> = {};
    for (const w of windows) byPhase[w.name] = latencyOf(receiverB.arrivals, w.from, w.to);
    const before = windows[0]!;
    const trouble = windows.filter((w) => w.name === 'down' || w.name === 'slow' || w.name === 'flapping');
    const during = latencyOf(receiverB.arrivals, trouble[0]!.from, trouble.at(-1)!.to);
    const beforeP99 = byPhase[before.name]!.p99;
    const relativeLimit = Math.max(P99_FACTOR * beforeP99, beforeP99 + NOISE_FLOOR_MS);
    const bOk = during.p99 <= P99_CEILING_MS && during.p99 <= relativeLimit;
    const rule = `FAIL if B's p99 during A's trouble > ${P99_CEILING_MS} ms, or > ${P99_FACTOR} x its p99 before (differences under ${NOISE_FLOOR_MS} ms ignored): limit ${round(Math.min(P99_CEILING_MS, relativeLimit))} ms`;

    const figures = {
      rule,
      acknowledged: { a: ackedA.length, b: ackedB.length },
      nonAcknowledged: { a: Object.entries(senderA.statuses).filter(([k]) => k !== '200'), b: Object.entries(senderB.statuses).filter(([k]) => k !== '200') },
      lost: { a: lostA.length, b: lostB.length },
      // Answered 200 more than once (a 503'd or timed-out POST retried is not a duplicate; a 200 the server timed out on is).
      duplicates: { a: receiverA.duplicates(), b: receiverB.duplicates() },
      postsPerMessageA: round(receiverA.posts / Math.max(1, receiverA.seen.size)),
      drainSec,
      bEndToEndMsBefore: byPhase[before.name],
      bEndToEndMsDuringTrouble: during,
      bEndToEndMsByPhase: byPhase,
      postsToAByPhase: Object.fromEntries(windows.map((w) => [w.name, { posts: w.postsToA, answered: w.answeredA }])),
      ingestP99Ms: {
        a: summarize(senderA.latencies.map((l) => l.ms)).p99,
        b: summarize(senderB.latencies.map((l) => l.ms)).p99,
      },
    };
    return verdictOf(
      [
        check('all load acknowledged', ackedA.length === senderA.sent && ackedB.length === senderB.sent, `A ${ackedA.length}/${senderA.sent}, B ${ackedB.length}/${senderB.sent} answered 200; the others: ${JSON.stringify({ a: { statuses: figures.nonAcknowledged.a, codes: senderA.errorCodes, firstError: senderA.firstError }, b: { statuses: figures.nonAcknowledged.b, codes: senderB.errorCodes, firstError: senderB.firstError } })}`),
        check("nothing lost on A after recovery", lostA.length === 0, `${lostA.length} of ${ackedA.length} missing after ${drainSec} s of drain`),
        check('nothing lost on B', lostB.length === 0, `${lostB.length} of ${ackedB.length} missing`),
        check("B not slowed by A's outage", bOk, `p99 ${during.p99} ms during (before: ${beforeP99} ms)`),
      ],
      figures,
    );
  },
};

function describeMode(mode: ReceiverMode): string {
  switch (mode.kind) {
    case 'healthy':
      return 'answers 200 at once';
    case 'down':
      return 'is down (port closed)';
    case 'slow':
      return `answers after ${mode.delayMs} ms`;
    case 'flapping':
      return 'answers 503 and 200 in turn';
  }
}
