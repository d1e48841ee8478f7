/**
 * kill -9 of the server under steady load, again and again, restarting it on
 * the same data dir: every acknowledged (200) message must reach the
 * webhook receiver at least once. Duplicates are allowed (at-least-once)
 * and reported.
 *
 * Each kill lands while every stage of the stage thread has work: delivery
 * (the load), Engage (an audience over every message, evaluated as they
 * come) and a deletion (a user's messages sent and a DELETE_ONLY request
 * made just before the kill) and processing (a burst of batches
 * acknowledged just before the kill, stored raw and not yet made into
 * messages: a 200 means stored raw). Afterwards every deletion must have
 * finished with nothing of its user left in the store, every acknowledged
 * message must have been processed and delivered, and Engage must have
 * caught up with every stored message.
 */
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { makeTempDir, removeTempDir } from '../bench/lib/children.js';
import { freePort } from '../bench/lib/free-port.js';
import { HookReceiver } from './lib/hook-receiver.js';
import { check, round, type Scenario, sleep, verdictOf, waitUntil } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { admin, createSource, type Server, startServer } from './lib/switchyard.js';
import { SQLITE_FILE } from '../src/store/sqlite/sqlite-store.js';

/** Messages of each user erased by a kill round's deletion request. */
const ERASED_USER_MESSAGES = 20;

/** Sends a user's messages (all must be acknowledged) and asks for their deletion at once. */
async function eraseSoon(url: string, authorization: string, userId: string): Promise<string> {
  for (let i = 0; i < ERASED_USER_MESSAGES; i++) {
    const response = await fetch(`${url}/v1/track`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ userId, event: 'Chaos', properties: { i } }),
      signal: AbortSignal.timeout(5000),
    });
    if (response.status !== 200) throw new Error(`a message of ${userId} answered ${response.status}`);
  }
  const created = await admin(url, 'POST', '/regulations', { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: [userId] }, 201);
  return String(created['id']);
}

/** Batches of a burst sent right before a kill, so that it lands while raw requests wait for processing. */
const BURST_BATCHES = 10;
const BURST_BATCH_SIZE = 50;

/** Sends a burst of batches at once; resolves the messageIds of those acknowledged. */
async function burst(url: string, authorization: string, kill: number): Promise<string[]> {
  const acknowledged: string[] = [];
  await Promise.all(
    Array.from({ length: BURST_BATCHES }, async (_, b) => {
      const ids = Array.from({ length: BURST_BATCH_SIZE }, (_, i) => `burst-${kill}-${b}-${i}`);
      try {
        const response = await fetch(`${url}/v1/batch`, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/json' },
          body: JSON.stringify({ batch: ids.map((messageId) => ({ type: 'track', userId: 'burst', event: 'Burst', messageId })) }),
          signal: AbortSignal.timeout(5000),
        });
        if (response.status === 200) acknowledged.push(...ids);
        await response.arrayBuffer();
      } catch {
        // Not acknowledged: nothing is owed.
      }
    }),
  );
  return acknowledged;
}

/** Raw requests stored and not yet processed, read beside the (killed) server. */
function rawPending(dataDir: string): number {
  const db = new BetterSqlite3(path.join(dataDir, SQLITE_FILE), { readonly: true });
  try {
    return db.prepare('SELECT count(*) FROM raw_requests').pluck().get() as number;
  } finally {
    db.close();
  }
}

/** What the store holds, read beside the running server (WAL readers never block it). */
function storeState(dataDir: string, erased: readonly string[]): { erasedLeft: number; engageCursor: number; lastSeq: number } {
  const db = new BetterSqlite3(path.join(dataDir, SQLITE_FILE), { readonly: true });
  try {
    const erasedLeft = db
      // The deletion leaves one message of its own per source: the delete call it sends to the destination.
      .prepare(`SELECT count(*) FROM messages WHERE user_id IN (SELECT value FROM json_each(?)) AND type IS NOT 'delete'`)
      .pluck()
      .get(JSON.stringify(erased)) as number;
    const engageCursor = db.prepare('SELECT cursor_seq FROM engage_state WHERE id = 1').pluck().get() as number;
    const lastSeq = (db.prepare('SELECT MAX(seq) FROM messages').pluck().get() as number | null) ?? 0;
    return { erasedLeft, engageCursor, lastSeq };
  } finally {
    db.close();
  }
}

const RATE_PER_SEC = 300;
const SERVER_ENV = {
  SWITCHYARD_RETRY_BASE_MS: '50',
  SWITCHYARD_RETRY_MAX_DELAY_MS: '1000',
  SWITCHYARD_DELIVERY_TIMEOUT_MS: '2000',
};

export const killUnderLoad: Scenario = {
  name: 'kill-under-load',
  summary: `kill -9 the server every 2-4 s under ${RATE_PER_SEC} msg/s while it delivers, evaluates an audience and runs a deletion; restart on the same data dir; every 200 must reach the receiver, every deletion finish`,
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
    // Engage evaluates every message of the load (no destinations: its syncs would be extra deliveries).
    await admin(server.url, 'POST', '/audiences', { name: 'Chaos senders', definition: { performed: { event: 'Chaos' } } }, 201);
    log(`server on ${server.url}, data dir ${dataDir}, receiver ${receiver.url}`);
    const erased: string[] = [];
    const deletions: string[] = [];

    const sender = new PacedSender({ baseUrl: server.url, authorization: source.authorization, ratePerSec: RATE_PER_SEC, idPrefix: 'kill', timeoutMs: 5000 });
    sender.start();
    defer(() => sender.stop());
    const restartMs: number[] = [];
    const burstAcknowledged: string[] = [];
    const rawPendingAtKills: number[] = [];
    for (let kill = 1; kill <= kills; kill++) {
      await sleep(2000 + Math.random() * 2000);
      const userId = `chaos-erased-${kill}`;
      deletions.push(await eraseSoon(server.url, source.authorization, userId));
      erased.push(userId);
      // The deletion waits for the raw requests acknowledged before it, then
      // runs within milliseconds; the kill follows the burst's last 200 at
      // once, so it lands while raw requests wait (mostly: processing a
      // burst takes milliseconds), during the deletion, or just after it.
      burstAcknowledged.push(...(await burst(server.url, source.authorization, kill)));
      await server.kill('SIGKILL');
      rawPendingAtKills.push(rawPending(dataDir));
      const acked = sender.acknowledged.size;
      const started = Date.now();
      server = await startServer({ label: 'switchyard', dataDir, port, env: SERVER_ENV });
      restartMs.push(Date.now() - started);
      log(`kill ${kill}/${kills}: killed with ${acked} acknowledged so far, ${receiver.seen.size} delivered, ${rawPendingAtKills.at(-1)} raw requests unprocessed; restarted in ${Date.now() - started} ms`);
    }
    await sleep(2000);
    await sender.stop();
    const acknowledged = [...sender.acknowledged, ...burstAcknowledged];
    log(`load stopped: ${sender.sent} sent, ${acknowledged.length} acknowledged; waiting up to ${drainTimeoutMs / 1000} s for delivery`);
    const drainStarted = Date.now();
    const drained = await waitUntil(() => receiver.missing(acknowledged).length === 0, drainTimeoutMs, 250);
    const drainSec = round((Date.now() - drainStarted) / 1000, 1);

    const finishedDeletions = await waitUntil(
      async () => {
        for (const id of deletions) {
          const regulation = await admin(server.url, 'GET', `/regulations/${id}`, undefined, 200);
          if (regulation['status'] !== 'FINISHED') return false;
        }
        return true;
      },
      drainTimeoutMs,
      250,
    );
    const engageCaughtUp = await waitUntil(() => {
      const state = storeState(dataDir, erased);
      return state.engageCursor >= state.lastSeq;
    }, drainTimeoutMs, 250);
    const state = storeState(dataDir, erased);

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
      rawPendingAtKills,
      restartMs: { max: Math.max(...restartMs), mean: Math.round(restartMs.reduce((a, b) => a + b, 0) / restartMs.length) },
      deletions: deletions.length,
      erasedMessagesLeft: state.erasedLeft,
      engage: { cursor: state.engageCursor, lastSeq: state.lastSeq },
      receiverPosts: receiver.posts,
    };
    return verdictOf(
      [
        check('enough load', acknowledged.length >= kills * 300, `${acknowledged.length} acknowledged (want >= ${kills * 300})`),
        check('a kill landed with raw requests unprocessed', rawPendingAtKills.some((n) => n > 0), `raw requests unprocessed at each kill: ${rawPendingAtKills.join(', ')}`),
        check('no acknowledged message lost', lost.length === 0, `${lost.length} of ${acknowledged.length} never reached the receiver${drained ? '' : ` within ${drainTimeoutMs / 1000} s`}`),
        check('every deletion finished', finishedDeletions, `${deletions.length} deletion request(s) made just before a kill${finishedDeletions ? ' all FINISHED' : ` not all FINISHED within ${drainTimeoutMs / 1000} s`}`),
        check('nothing of an erased user left', state.erasedLeft === 0, `${state.erasedLeft} stored message(s) of ${erased.length} erased user(s)`),
        check('Engage caught up after the kills', engageCaughtUp, `cursor ${state.engageCursor}, last stored seq ${state.lastSeq}`),
      ],
      figures,
    );
  },
};
