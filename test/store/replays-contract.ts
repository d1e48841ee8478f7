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

    void it("starts a replay's cursor just before the first seq of its range, whatever the order of seq and receivedAt", async () => {
      const other: SourceRecord = { ...source, id: 'src_history', name: 'history', writeKey: 'key_history' };
      await store.insertSource(other);
      const at = (receivedAt: number, n: number): IngestEntry => ({ ...entry(n), sourceId: other.id, messageId: `history-${n}`, receivedAt });
      const H = T0 + 1_000_000;
      // A long history before the range, then the range, with a message of it
      // stored after a later one (as nodes committing side by side can), then later ones.
      const history = await store.appendMessages(Array.from({ length: 300 }, (_, i) => at(H + i, 1_000 + i)), T0 - 1);
      const [inRange, later, lateInRange] = await store.appendMessages([at(H + 500, 2_000), at(H + 900, 2_001), at(H + 499, 2_002)], T0 - 1);
      await store.appendMessages(Array.from({ length: 20 }, (_, i) => at(H + 1_000 + i, 3_000 + i)), T0 - 1);
      // Another source's messages in the same time range count for nothing.
      await store.appendMessages([{ ...entry(4_000), receivedAt: H + 450 }], T0 - 1);

      assert.deepEqual(await store.replayRangeSeqs(other.id, H + 400, H + 800), { first: inRange!.seq, last: lateInRange!.seq });
      assert.deepEqual(await store.replayRangeSeqs(other.id, H + 100, H + 102), { first: history[100]!.seq, last: history[101]!.seq }, 'from included, to not');
      assert.equal(await store.replayRangeSeqs(other.id, H + 5_000, H + 6_000), undefined);

      const create = async (id: string, from: number, to: number): Promise<number> => {
        assert.equal(await store.createReplay({ id, sourceId: other.id, from, to, receivers: undefined, types: undefined, events: undefined, createdAt: T0 }), undefined);
        const created = (await store.getReplay(id))!;
        await store.endReplay(id, 'cancelled', T0);
        return created.cursor;
      };
      assert.equal(await create('rpl_late', H + 400, H + 800), inRange!.seq - 1, 'the history before the range is never read');
      assert.equal(await create('rpl_mid', H + 150, H + 600), history[150]!.seq - 1);
      assert.ok(later!.seq > inRange!.seq);
      assert.equal(await create('rpl_whole', H - 10, H + 2_000), history[0]!.seq - 1);
      // A range with nothing stored yet (or ahead): whatever arrives later has a higher seq than any stored now.
      const highest = await store.highestMessageSeq();
      assert.equal(await create('rpl_ahead', H + 5_000, H + 6_000), highest);
    });

    void it('finds the first and last seq of a range longer than one read (many messages sharing a receivedAt)', async () => {
      const long: SourceRecord = { ...source, id: 'src_long', name: 'long', writeKey: 'key_long' };
      await store.insertSource(long);
      const H = T0 + 5_000_000;
      // 10,050 messages, seven to a millisecond (SQLite reads 10,000 index keys at a time); the lowest seq comes last.
      const stored = [];
      for (let start = 0; start < 10_050; start += 1_000) {
        const count = Math.min(1_000, 10_050 - start);
        const batch = Array.from({ length: count }, (_, i): IngestEntry => ({ ...entry(start + i), sourceId: long.id, messageId: `long-${start + i}`, receivedAt: H + 100 + Math.floor((start + i) / 7) }));
        stored.push(...(await store.appendMessages(batch, T0 - 1)));
      }
      const [lowest] = await store.appendMessages([{ ...entry(20_000), sourceId: long.id, messageId: 'long-last', receivedAt: H + 99 }], T0 - 1);
      // Stored last, received first: the seq order is the reverse of the receivedAt order for it.
      assert.deepEqual(await store.replayRangeSeqs(long.id, H, H + 10_000), { first: stored[0]!.seq, last: lowest!.seq });
      assert.deepEqual(await store.replayRangeSeqs(long.id, H + 100, H + 10_000), { first: stored[0]!.seq, last: stored[10_049]!.seq });
      assert.deepEqual(await store.replayRangeSeqs(long.id, H + 1_100, H + 1_101), { first: stored[7_000]!.seq, last: stored[7_006]!.seq });
    });

    void it('refuses a replay past the running limits of its source or of all, and counts only running ones', async () => {
      const second: SourceRecord = { ...source, id: 'src_second', name: 'second', writeKey: 'key_second' };
      await store.insertSource(second);
      const limits = { perSource: 2, total: 3 };
      const create = (id: string, sourceId: string) =>
        store.createReplay({ id, sourceId, from: T0, to: T0 + 10, receivers: undefined, types: undefined, events: undefined, createdAt: T0 }, limits);
      const running = async (): Promise<number> => (await store.listRunningReplays()).length;
      assert.equal(await running(), 0);
      assert.equal(await create('rpl_a1', source.id), undefined);
      assert.equal(await create('rpl_a2', source.id), undefined);
      assert.equal(await create('rpl_a3', source.id), 'source_limit');
      assert.equal(await store.getReplay('rpl_a3'), undefined, 'a refused replay is not stored');
      assert.equal(await create('rpl_b1', second.id), undefined);
      assert.equal(await create('rpl_b2', second.id), 'total_limit');
      // A cancelled replay frees its place, and so does one that is done.
      await store.endReplay('rpl_a1', 'cancelled', T0 + 1);
      assert.equal(await create('rpl_b2', second.id), undefined);
      assert.equal(await create('rpl_a3', source.id), 'total_limit');
      await store.endReplay('rpl_b1', 'done', T0 + 1);
      assert.equal(await create('rpl_a3', source.id), undefined);
      assert.equal(await running(), 3);
      // Without limits (the store's own callers): always stored.
      assert.equal(await store.createReplay({ id: 'rpl_free', sourceId: source.id, from: T0, to: T0 + 10, receivers: undefined, types: undefined, events: undefined, createdAt: T0 }), undefined);
      for (const replay of await store.listRunningReplays()) await store.endReplay(replay.id, 'cancelled', T0 + 2);
    });

    void it('holds the limit when replays are created at once (several nodes: the store decides)', async () => {
      const limits = { perSource: 3, total: 100 };
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          store.createReplay({ id: `rpl_race_${i}`, sourceId: source.id, from: T0, to: T0 + 10, receivers: undefined, types: undefined, events: undefined, createdAt: T0 }, limits),
        ),
      );
      assert.equal(results.filter((r) => r === undefined).length, 3);
      assert.equal(results.filter((r) => r === 'source_limit').length, 5);
      assert.equal((await store.listRunningReplays()).length, 3);
      for (const replay of await store.listRunningReplays()) await store.endReplay(replay.id, 'cancelled', T0 + 2);
    });
  });
}
