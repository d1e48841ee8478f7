import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RawProcessor } from '../../src/ingest/raw-processor.js';
import { Metrics } from '../../src/metrics.js';
import { SuppressionList } from '../../src/regulations/suppression-list.js';
import { RANGE_GRACE_MS, ReplayRunner } from '../../src/replays/replay-runner.js';
import { SourceDirectory } from '../../src/sources/source-directory.js';
import type { IngestEntry, ReplayRecord, Store } from '../../src/store/store.js';
import { describePostgres } from '../helpers/postgres.js';
import { type OpenedStore, T0, addSource, openFreshPostgresStore, openMemoryStore } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

/*
 * A replay ends only once every message of its range can be in the store:
 * `to` has passed (and a grace after it, for commits that lag their
 * `receivedAt`), and every raw request acknowledged by then is processed;
 * and only once it has read every message stored up to then, since seq
 * order need not be `receivedAt` order.
 * Ingest answers 200 once a request is stored raw and processing makes its
 * messages later, so a replay that ended at the last stored message would
 * skip what was acknowledged before `to` but processed after. The runner
 * here is the one `serve` runs, on a real store; the test plays the
 * delivery worker (claims and finishes what the replay queued) and
 * controls processing and the clock.
 */

const HOUR = 3_600_000;
const RECEIVER = 'http://receiver.example/hook';
const noError = (error: unknown): void => assert.fail(error instanceof Error ? error : new Error(String(error)));

function rawTrack(messageId: string, receivedAt: number) {
  return {
    sourceId: 's',
    route: 'track' as const,
    receivedAt,
    ip: '127.0.0.1',
    configVersion: 0,
    messageCount: 1,
    headers: undefined,
    body: JSON.stringify({ userId: 'u', event: 'E', messageId }),
  };
}

/** The replay runner and a processor on `store`, a clock the test moves, and a count of the runner's steps. */
async function rig(store: Store) {
  let now = T0 + 1_000;
  let steps = 0;
  // Every step with room reads the settled seq first: counting those counts steps.
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (property === 'settledMessageSeq') steps += 1;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  const directory = new SourceDirectory(store, { pollMs: HOUR, onError: noError });
  const suppressions = new SuppressionList(store, { pollMs: HOUR, onError: noError });
  await directory.start();
  await suppressions.start();
  const runner = new ReplayRunner({ store: counted, directory, suppressions, now: () => now, pollMs: 20, idleWaitMaxMs: 20, onError: noError });
  const processor = new RawProcessor({
    store,
    directory,
    suppressions,
    metrics: new Metrics({ processMetrics: false }),
    now: () => now,
    newMessageId: () => `generated-${Math.random()}`,
    pollMs: HOUR,
    onError: noError,
  });
  const replay = async (): Promise<ReplayRecord> => (await store.getReplay('rpl_1'))!;
  return {
    runner,
    replay,
    setNow(at: number): void {
      now = at;
    },
    /** Processes every raw request stored so far. */
    async process(): Promise<void> {
      processor.wake();
      await eventually(async () => ((await store.rawBacklog()).requests === 0 ? true : undefined), 10_000, 'processing');
    },
    /** Resolves once the runner has taken `n` more steps, or the replay ended (a runner takes none without a running replay). */
    async steps(n: number): Promise<void> {
      const target = steps + n;
      await eventually(async () => (steps >= target || (await replay()).status !== 'running' ? true : undefined), 10_000, `${n} replay steps`);
    },
    /** Plays the delivery worker: succeeds every queued replay delivery; resolves how many. */
    async deliverQueued(): Promise<number> {
      const claimed = await store.claimDeliveries({ owner: 'test-worker', limit: 100, leaseMs: 60_000, now });
      await store.finishDeliveries(
        claimed.map((job) => ({ kind: 'succeeded' as const, id: job.id, owner: 'test-worker', at: now, firstAttemptAt: now, attempts: [] })),
      );
      return claimed.length;
    },
    async queued(n: number): Promise<void> {
      await eventually(async () => ((await replay()).queued >= n ? true : undefined), 10_000, `${n} queued`);
    },
    async stop(): Promise<void> {
      await runner.stop();
      await processor.stop();
      directory.stop();
      suppressions.stop();
    },
  };
}

function describeRangeComplete(name: string, open: () => Promise<OpenedStore>): void {
  void describe(`replays end once their range is complete: ${name}`, () => {
    void it('waits for a raw request acknowledged before `to` to be processed, and replays its message', async () => {
      const { store, cleanup } = await open();
      const r = await rig(store);
      try {
        await addSource(store, 's');
        await store.appendRawRequests([rawTrack('before-1', T0 + 100)]);
        await r.process();
        // Acknowledged before `to`, not processed yet: its message does not exist.
        await store.appendRawRequests([rawTrack('before-2', T0 + 200)]);
        await store.createReplay({ id: 'rpl_1', sourceId: 's', from: T0, to: T0 + 500, receivers: [RECEIVER], types: undefined, events: undefined, createdAt: T0 + 1_000 });
        r.setNow(T0 + 500 + RANGE_GRACE_MS);
        r.runner.start();
        await r.queued(1);
        assert.equal(await r.deliverQueued(), 1);
        // Nothing is pending and the stored messages are all replayed: the runner would end it here.
        await r.steps(5);
        assert.equal((await r.replay()).status, 'running', 'not done while a request of its range waits for processing');

        await r.process();
        await r.queued(2);
        assert.equal(await r.deliverQueued(), 1);
        await eventually(async () => ((await r.replay()).status === 'done' ? true : undefined), 10_000, 'the replay to end');
        const done = await r.replay();
        assert.deepEqual([done.queued, done.delivered], [2, 2], 'both messages of the range were replayed');
      } finally {
        await r.stop();
        await cleanup();
      }
    });

    void it('runs until `to` has passed, replaying what arrives before it', async () => {
      const { store, cleanup } = await open();
      const r = await rig(store);
      try {
        await addSource(store, 's');
        r.setNow(T0 + 1_000);
        await store.createReplay({ id: 'rpl_1', sourceId: 's', from: T0, to: T0 + 5_000, receivers: [RECEIVER], types: undefined, events: undefined, createdAt: T0 + 1_000 });
        r.runner.start();
        await r.steps(5);
        assert.equal((await r.replay()).status, 'running', 'no message yet, but `to` is still ahead');

        await store.appendRawRequests([rawTrack('later', T0 + 2_000)]);
        r.setNow(T0 + 2_000);
        await r.process();
        await r.queued(1);
        assert.equal(await r.deliverQueued(), 1);
        await r.steps(5);
        assert.equal((await r.replay()).status, 'running', 'still before `to`');

        r.setNow(T0 + 5_000);
        await r.steps(5);
        assert.equal((await r.replay()).status, 'running', 'within the grace after `to`: a request stamped before it may still be committing');
        r.setNow(T0 + 5_000 + RANGE_GRACE_MS);
        await eventually(async () => ((await r.replay()).status === 'done' ? true : undefined), 10_000, 'the replay to end once `to` passed');
        assert.equal((await r.replay()).queued, 1);
      } finally {
        await r.stop();
        await cleanup();
      }
    });

    void it('replays a message of its range stored after a page of later ones (seq order is not receivedAt order)', async () => {
      const { store, cleanup } = await open();
      const r = await rig(store);
      try {
        await addSource(store, 's');
        const entry = (messageId: string, receivedAt: number): IngestEntry => ({
          sourceId: 's',
          status: 'accepted',
          type: 'track',
          messageId,
          userId: 'u',
          receivedAt,
          body: JSON.stringify({ type: 'track', event: 'E', userId: 'u', messageId }),
          destinations: [],
        });
        // As two nodes committing side by side can store them: 60 messages after `to` first, then one of the range.
        const later = Array.from({ length: 60 }, (_, i) => entry(`after-${i}`, T0 + 2_000 + i));
        await store.appendMessages(later, T0 - 1);
        await store.appendMessages([entry('in-range', T0 + 100)], T0 - 1);
        r.setNow(T0 + 500 + RANGE_GRACE_MS);
        await store.createReplay({ id: 'rpl_1', sourceId: 's', from: T0, to: T0 + 500, receivers: [RECEIVER], types: undefined, events: undefined, createdAt: T0 + 3_000 });
        r.runner.start();
        await eventually(async () => ((await r.replay()).status !== 'running' ? true : (await r.deliverQueued(), undefined)), 10_000, 'the replay to end');
        assert.equal((await r.replay()).queued, 1, 'the message of the range was replayed');
      } finally {
        await r.stop();
        await cleanup();
      }
    });
  });
}

describeRangeComplete('sqlite', openMemoryStore);

await describePostgres('replays end once their range is complete: postgres', () => {
  describeRangeComplete('postgres', openFreshPostgresStore);
});
