import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SuppressionList } from '../../src/regulations/suppression-list.js';
import { RANGE_GRACE_MS, ReplayRunner } from '../../src/replays/replay-runner.js';
import { SourceDirectory } from '../../src/sources/source-directory.js';
import type { IngestEntry, ReplayRecord, Store } from '../../src/store/store.js';
import { describePostgres } from '../helpers/postgres.js';
import { type OpenedStore, T0, addSource, openFreshPostgresStore, openMemoryStore } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

/*
 * What a replay costs is its range, not the source's history: it starts
 * reading just before the first seq of its range and stops at the last
 * (found by the index on receivedAt), and one with nothing to do looks
 * again less and less often. Proved by counting what the runner reads from
 * a real store (rows, and how often it looks), never by timing how fast.
 * The runner is the one `serve` runs; the test plays the delivery worker.
 */

const HOUR = 3_600_000;
const RECEIVER = 'http://receiver.example/hook';
const noError = (error: unknown): void => assert.fail(error instanceof Error ? error : new Error(String(error)));

const entry = (n: number, receivedAt: number): IngestEntry => ({
  sourceId: 's',
  status: n % 7 === 3 ? 'filtered' : 'accepted',
  type: 'track',
  messageId: `m-${n}`,
  userId: `u${n}`,
  receivedAt,
  body: JSON.stringify({ type: 'track', event: 'E', userId: `u${n}`, messageId: `m-${n}` }),
  destinations: [],
});

/** A runner on `store` whose store calls are counted, a clock the test sets, and a stand-in delivery worker. */
async function rig(store: Store, now: number) {
  const reads = { rows: 0, maxSeq: 0, afterSeqs: [] as number[], pendingCounts: 0 };
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => unknown).bind(target);
      if (property === 'listMessagesAfter') {
        return async (...args: unknown[]) => {
          const page = (await method(...args)) as Array<{ seq: number }>;
          reads.rows += page.length;
          for (const message of page) reads.maxSeq = Math.max(reads.maxSeq, message.seq);
          reads.afterSeqs.push(args[1] as number);
          return page;
        };
      }
      if (property === 'countPendingReplayDeliveries') {
        return (...args: unknown[]) => {
          reads.pendingCounts += 1;
          return method(...args);
        };
      }
      return method;
    },
  });
  const directory = new SourceDirectory(store, { pollMs: HOUR, onError: noError });
  const suppressions = new SuppressionList(store, { pollMs: HOUR, onError: noError });
  await directory.start();
  await suppressions.start();
  // pollMs as `serve` has it: the idle test counts how often a replay is looked at.
  const runner = new ReplayRunner({ store: counted, directory, suppressions, now: () => now, pollMs: 2_000, onError: noError });
  const replayed: number[] = [];
  const replay = async (id: string): Promise<ReplayRecord> => (await store.getReplay(id))!;
  return {
    runner,
    reads,
    replayed,
    replay,
    /** Plays the delivery worker until the replay has ended, noting each replayed message's seq. */
    async deliverUntilDone(id: string): Promise<ReplayRecord> {
      return eventually(async () => {
        const claimed = await store.claimDeliveries({ owner: 'test-worker', limit: 100, leaseMs: 60_000, now });
        replayed.push(...claimed.map((job) => job.messageSeq));
        await store.finishDeliveries(claimed.map((job) => ({ kind: 'succeeded' as const, id: job.id, owner: 'test-worker', at: now, firstAttemptAt: now, attempts: [] })));
        const found = await replay(id);
        return found.status === 'done' && claimed.length === 0 ? found : undefined;
      }, 20_000, 'the replay to end');
    },
    async stop(): Promise<void> {
      await runner.stop();
      directory.stop();
      suppressions.stop();
    },
  };
}

function describeBoundedRead(name: string, open: () => Promise<OpenedStore>): void {
  void describe(`a replay reads its range, not the history: ${name}`, () => {
    void it('replays exactly the messages of a window in the middle of a long history, reading about as many rows as it holds', async () => {
      const { store, cleanup } = await open();
      const now = T0 + HOUR;
      const r = await rig(store, now);
      try {
        await addSource(store, 's');
        // 3,000 messages a millisecond apart; the window holds 1,500 to 1,519.
        const stored = [];
        for (let start = 0; start < 3_000; start += 500) {
          stored.push(...(await store.appendMessages(Array.from({ length: 500 }, (_, i) => entry(start + i, T0 + start + i)), T0 - 1)));
        }
        const window = stored.slice(1_500, 1_520).map((s) => s.seq);
        await store.createReplay({ id: 'rpl_w', sourceId: 's', from: T0 + 1_500, to: T0 + 1_520, receivers: [RECEIVER], types: undefined, events: undefined, createdAt: now });
        assert.equal((await r.replay('rpl_w')).cursor, window[0]! - 1, 'the cursor starts just before the window');
        assert.ok(now > T0 + 1_520 + RANGE_GRACE_MS);
        r.runner.start();
        const done = await r.deliverUntilDone('rpl_w');

        assert.deepEqual(r.replayed, window, 'every message of the window (accepted and filtered), in order, and no other');
        assert.deepEqual([done.queued, done.delivered, done.failed], [20, 20, 0]);
        assert.ok(Math.min(...r.reads.afterSeqs) >= window[0]! - 1, 'no read starts before the window');
        // Pages run a little past the window before the runner sees it is past; never through the 1,480 messages after it.
        assert.ok(r.reads.rows <= 20 + 2 * 48, `read ${r.reads.rows} rows for a window of 20 in a history of 3,000`);
        assert.ok(r.reads.maxSeq <= window[19]! + 2 * 48, `read up to seq ${r.reads.maxSeq}`);
      } finally {
        await r.stop();
        await cleanup();
      }
    });

    void it('a replay with events to select reads its window and stops at its last message', async () => {
      const { store, cleanup } = await open();
      const now = T0 + HOUR;
      const r = await rig(store, now);
      try {
        await addSource(store, 's');
        // Selective: pages of 200. The window's last message is stored after 900 later ones (seqs need not follow receivedAt).
        const early = await store.appendMessages(Array.from({ length: 100 }, (_, i) => entry(i, T0 + i)), T0 - 1);
        await store.appendMessages(Array.from({ length: 900 }, (_, i) => entry(1_000 + i, T0 + 10_000 + i)), T0 - 1);
        const [late] = await store.appendMessages([entry(2_000, T0 + 50)], T0 - 1);
        await store.appendMessages(Array.from({ length: 900 }, (_, i) => entry(3_000 + i, T0 + 20_000 + i)), T0 - 1);
        await store.createReplay({ id: 'rpl_e', sourceId: 's', from: T0 + 40, to: T0 + 60, receivers: [RECEIVER], types: undefined, events: ['E'], createdAt: now });
        r.runner.start();
        const done = await r.deliverUntilDone('rpl_e');
        const expected = [...early.slice(40, 60).map((s) => s.seq), late!.seq];
        assert.deepEqual([...r.replayed].sort((a, b) => a - b), expected);
        assert.equal(done.queued, 21);
        // It reads from the window to its last message (stored after 900 later ones), and none of the 900 after that.
        assert.ok(Math.min(...r.reads.afterSeqs) >= early[40]!.seq - 1, 'no read starts before the window');
        assert.ok(r.reads.maxSeq <= late!.seq, `read up to seq ${r.reads.maxSeq}; the window ends at ${late!.seq}, the history at ${late!.seq + 900}`);
      } finally {
        await r.stop();
        await cleanup();
      }
    });

    void it('an idle replay (its `to` ahead) looks again less and less often, and still sends what arrives', async () => {
      const { store, cleanup } = await open();
      const now = T0 + 1_000;
      const r = await rig(store, now);
      try {
        await addSource(store, 's');
        await store.createReplay({ id: 'rpl_i', sourceId: 's', from: T0, to: T0 + HOUR, receivers: [RECEIVER], types: undefined, events: ['Selected'], createdAt: now });
        r.runner.start();
        // Messages it does not select arrive meanwhile: reading them is no reason to look again sooner.
        const until = performance.now() + 3_000;
        let n = 0;
        while (performance.now() < until) {
          await store.appendMessages([entry(n++, T0 + 500)], T0 - 1);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        // Looked at after 0, 200, 600, 1,400 and 3,000 ms: at most 5 in 3 s (a look every 200 ms would be 15).
        // A slow machine only looks fewer times.
        assert.ok(r.reads.pendingCounts <= 5, `looked ${r.reads.pendingCounts} times in 3 s`);
        assert.equal((await r.replay('rpl_i')).status, 'running');

        const [selected] = await store.appendMessages([{ ...entry(9_999, T0 + 600), body: JSON.stringify({ type: 'track', event: 'Selected', userId: 'u', messageId: 'sel' }) }], T0 - 1);
        await eventually(async () => ((await r.replay('rpl_i')).queued === 1 ? true : undefined), 15_000, 'the selected message queued');
        const claimed = await store.claimDeliveries({ owner: 'test-worker', limit: 100, leaseMs: 60_000, now });
        assert.deepEqual(claimed.map((job) => job.messageSeq), [selected!.seq]);
      } finally {
        await r.stop();
        await cleanup();
      }
    });
  });
}

describeBoundedRead('sqlite', openMemoryStore);

await describePostgres('a replay reads its range, not the history: postgres', () => {
  describeBoundedRead('postgres', openFreshPostgresStore);
});
