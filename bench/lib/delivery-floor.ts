/**
 * The store floor of delivery.throughput, run as its own process in
 * Switchyard's place: the least Switchyard's design must do per delivery,
 * and nothing else. It prefills its own embedded store (a temp folder,
 * before it reports `ready`) with the messages and delivery jobs the rig
 * gives Switchyard (the same ids and bodies, under a stand-in source as the
 * poster's bodies are), then drains them as the delivery worker does at
 * its core:
 *
 * - jobs claimed with a lease through the store adapter (`claimDeliveries`,
 *   up to the worker's in-flight limit, again once half of it is free);
 * - each job's webhook body made from the stored message and signed
 *   (X-Signature), then POSTed through an undici Agent with the worker's
 *   connections per origin, through undici's dispatch API as WebhookSender does;
 * - each answer recorded as a succeeded outcome with its attempt, in batches
 *   (`finishDeliveries`, as OutcomeBatcher writes them).
 *
 * No circuit breaker, origin slots, rate caps, retry decisions, metrics,
 * spans or response keeping: what the worker adds on top of this is
 * Switchyard's ratio to the floor; what the store adds is the floor's ratio
 * to the bare baseline (lib/delivery-poster.ts).
 *
 * Speaks the poster's protocol (PosterArgs in, PosterLine out).
 * Usage: node dist/bench/lib/delivery-floor.js '<PosterArgs JSON>'
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Agent, type Dispatcher } from 'undici';
import { webhookBody } from '../../src/domain/webhook-payload.js';
import { signBody } from '../../src/delivery/signer.js';
import { defaultWorkerLimits } from '../../src/delivery/delivery-worker.js';
import { loadConfig } from '../../src/config.js';
import type { SourceRecord } from '../../src/store/records.js';
import type { DeliveryOutcome } from '../../src/store/store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { appendBacklog, entryMaker } from './delivery-bodies.js';
import { type PosterArgs, type PosterLine, PostTally } from './delivery-protocol.js';

/** As the worker: a batch of outcomes is written at this size or this long after its first one. */
const OUTCOME_BATCH = 256;
const OUTCOME_DELAY_MS = 10;
const OWNER = 'delivery-floor';

function send(line: PosterLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** One POST through undici's dispatch API: resolves the status code, or the error that ended it. */
function post(agent: Agent, origin: string, pathname: string, headers: Record<string, string>, body: string): Promise<number | Error> {
  return new Promise((resolve) => {
    let status = 0;
    const handler: Dispatcher.DispatchHandler = {
      // Its presence tells undici this handler speaks the controller API, as WebhookSender's does.
      onRequestStart: () => undefined,
      onResponseStart: (_controller, statusCode) => {
        status = statusCode;
      },
      onResponseEnd: () => resolve(status),
      onResponseError: (_controller, error) => resolve(error),
    };
    agent.dispatch({ origin, path: pathname, method: 'POST', headers, body }, handler);
  });
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: delivery-floor <PosterArgs JSON>');
  const args = JSON.parse(raw) as PosterArgs;
  const { maxInFlight, leaseMs } = defaultWorkerLimits(loadConfig({}, {}));
  const claimAtLeast = Math.floor(maxInFlight / 2);

  const prepareStarted = performance.now();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-delivery-floor-'));
  const store = SqliteStore.open({ dataDir, durability: process.env['SWITCHYARD_DURABILITY'] === 'fsync' ? 'fsync' : 'process' });
  try {
    await store.migrate();
    const source: SourceRecord = { id: 'src_floor', name: 'floor', writeKey: 'floor-write-key', enabled: true, createdAt: 0, updatedAt: 0 };
    await store.insertSource(source);
    const makeEntries = entryMaker(source, { idPrefix: args.idPrefix, receivedAt: args.receivedAt });
    await appendBacklog(store, makeEntries, args.count, args.receivedAt);
    send({ event: 'ready', prepareSec: Math.round(performance.now() - prepareStarted) / 1000 });

    const target = new URL(args.url);
    const agent = new Agent({ connections: args.concurrency });
    const tally = new PostTally();

    let outcomes: DeliveryOutcome[] = [];
    let outcomeTimer: NodeJS.Timeout | undefined;
    let writing = Promise.resolve();
    const writeOutcomes = (): void => {
      clearTimeout(outcomeTimer);
      outcomeTimer = undefined;
      const batch = outcomes;
      outcomes = [];
      if (batch.length > 0) writing = writing.then(() => store.finishDeliveries(batch)).then(() => undefined);
    };

    let inFlight = 0;
    let claiming = false;
    let drained = false;
    let finished!: () => void;
    const allDone = new Promise<void>((resolve) => (finished = resolve));
    const deliver = async (id: number, stored: string): Promise<void> => {
      const body = webhookBody(stored) ?? stored;
      const headers = { 'user-agent': args.userAgent, 'content-type': 'application/json', 'x-signature': signBody(body, args.sharedSecret) };
      const answer = await post(agent, target.origin, target.pathname, headers, body);
      const at = Date.now();
      tally.record(answer);
      const statusCode = answer instanceof Error ? undefined : answer;
      outcomes.push({ kind: 'succeeded', id, owner: OWNER, at, firstAttemptAt: at, attempts: [{ at, url: args.url, statusCode, durationMs: 0 }] });
      if (outcomes.length >= OUTCOME_BATCH) writeOutcomes();
      else outcomeTimer ??= setTimeout(writeOutcomes, OUTCOME_DELAY_MS);
      inFlight -= 1;
      if (maxInFlight - inFlight >= claimAtLeast) void claim();
      if (drained && inFlight === 0) finished();
    };
    const claim = async (): Promise<void> => {
      if (claiming || drained) return;
      claiming = true;
      try {
        const jobs = await store.claimDeliveries({ owner: OWNER, limit: maxInFlight - inFlight, leaseMs, now: Date.now() });
        if (jobs.length === 0) {
          drained = true;
          if (inFlight === 0) finished();
          return;
        }
        inFlight += jobs.length;
        for (const job of jobs) void deliver(job.id, job.body);
      } finally {
        claiming = false;
      }
    };
    await claim();
    await allDone;
    writeOutcomes();
    await writing;

    const done = tally.done();
    await agent.close();
    send(done);
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  send({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
