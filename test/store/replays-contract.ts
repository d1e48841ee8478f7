import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { IngestEntry, SourceRecord, Store } from '../../src/store/store.js';

/** The Store contract of replays, one suite every adapter runs. `open` gives a fresh, migrated, empty store. */
export function describeReplaysContract(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  void describe(`Store contract, replays: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    const T0 = 1_700_000_000_000;
    const source: SourceRecord = { id: 'src_replay', name: 'replay', writeKey: 'key_replay', enabled: true, createdAt: T0, updatedAt: T0 };
    const entry = (n: number): IngestEntry => ({
      sourceId: source.id,
      status: 'accepted',
      type: 'track',
      messageId: `replay-${n}`,
      userId: 'u',
      receivedAt: T0 + n,
      body: JSON.stringify({ type: 'track', event: 'E', messageId: `replay-${n}` }),
      destinations: [],
    });

    before(async () => {
      ({ store, cleanup } = await open());
      await store.insertSource(source);
    });
    after(async () => {
      await cleanup();
    });

    void it('queues pages exclusively by cursor, counts outcomes, and cancels pending deliveries', async () => {
      const appended = await store.appendMessages([1, 2, 3].map(entry), T0 - 1);
      const seqs = appended.map((a) => a.seq);
      await store.createReplay({ id: 'rpl_1', sourceId: source.id, from: T0, to: T0 + 10, receivers: ['http://a.example/'], types: undefined, events: ['E'], createdAt: T0 });
      const fresh = await store.getReplay('rpl_1');
      assert.equal(fresh?.status, 'running');
      assert.deepEqual([fresh?.cursor, fresh?.queued, fresh?.delivered, fresh?.failed], [0, 0, 0, 0]);
      assert.deepEqual(fresh?.receivers, ['http://a.example/']);
      assert.deepEqual(fresh?.events, ['E']);
      assert.equal(fresh?.types, undefined);
      assert.deepEqual((await store.listRunningReplays()).map((r) => r.id), ['rpl_1']);

      const page = { replayId: 'rpl_1', sourceId: source.id, fromCursor: 0, toCursor: seqs[2]!, messageSeqs: seqs.slice(0, 2), receivers: ['http://a.example/'], at: T0 + 100 };
      assert.equal(await store.queueReplayPage(page), true);
      assert.equal(await store.queueReplayPage(page), false, 'the cursor moved: a second queue of the same page does nothing');
      // A node whose window had less room stops its page earlier: same cursor, so still refused.
      assert.equal(await store.queueReplayPage({ ...page, toCursor: seqs[0]!, messageSeqs: seqs.slice(0, 1) }), false, 'nor does a shorter page from the same cursor');
      assert.equal(await store.countPendingReplayDeliveries('rpl_1'), 2);

      const claimed = await store.claimDeliveries({ owner: 'w', limit: 10, leaseMs: 1_000, now: T0 + 100 });
      assert.equal(claimed.length, 2);
      assert.ok(claimed.every((c) => c.replayId === 'rpl_1' && c.retryUrls?.[0] === 'http://a.example/'));
      await store.finishDeliveries([
        { kind: 'succeeded', id: claimed[0]!.id, owner: 'w', at: T0 + 101, firstAttemptAt: T0 + 101, attempts: [] },
        { kind: 'deferred', id: claimed[1]!.id, owner: 'w', at: T0 + 101, nextAttemptAt: T0 + 200 },
      ]);
      const listed = await store.listReplays(source.id, 10);
      assert.deepEqual([listed[0]?.queued, listed[0]?.delivered, listed[0]?.failed, listed[0]?.cursor], [2, 1, 0, seqs[2]]);
      assert.equal((await store.listDeliveries({ sourceId: source.id, limit: 10 }))[0]?.replayId, 'rpl_1');

      const cancelled = await store.endReplay('rpl_1', 'cancelled', T0 + 300);
      assert.equal(cancelled?.status, 'cancelled');
      assert.equal(await store.countPendingReplayDeliveries('rpl_1'), 0, 'nothing more is sent');
      assert.equal(cancelled?.delivered, 1, 'what was delivered stays counted');
      assert.equal((await store.endReplay('rpl_1', 'done', T0 + 400))?.status, 'cancelled', 'an ended replay stays as it ended');
      assert.equal(await store.queueReplayPage({ ...page, fromCursor: seqs[2]!, toCursor: seqs[2]! + 1 }), false, 'nor is more queued');
      assert.deepEqual(await store.listRunningReplays(), []);
      assert.equal(await store.getReplay('rpl_missing'), undefined);
    });
  });
}
