import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

describe('SqliteStore.releaseLeases (single-node restart)', () => {
  it("frees every lease but the caller's, so a restarted worker resumes at once", async () => {
    const store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
    await store.migrate();
    try {
      const t0 = 1_700_000_000_000;
      await store.insertSource({ id: 'src_1', name: 's', writeKey: 'k'.repeat(32), enabled: true, createdAt: t0, updatedAt: t0 });
      const entry = (n: number) => ({
        sourceId: 'src_1', status: 'accepted' as const, type: 'track', messageId: `m${n}`, userId: 'u', receivedAt: t0, body: '{}', destinations: ['webhooks' as const],
      });
      await store.appendMessages([entry(1), entry(2), entry(3)], 0);
      const dead = await store.claimDeliveries({ owner: 'dead-worker', limit: 2, leaseMs: 60_000, now: t0 });
      const alive = await store.claimDeliveries({ owner: 'new-worker', limit: 1, leaseMs: 60_000, now: t0 });
      assert.equal(dead.length, 2);
      assert.equal(alive.length, 1);
      assert.equal((await store.claimDeliveries({ owner: 'x', limit: 10, leaseMs: 60_000, now: t0 + 1 })).length, 0, 'all leased');

      let notified = false;
      store.subscribe((topic) => (notified ||= topic === 'deliveries'));
      assert.equal(await store.releaseLeases('new-worker', t0 + 2), 2);
      assert.ok(notified, 'wakes workers');
      assert.equal(await store.nextDeliveryDueAt(), t0 + 2);
      const again = await store.claimDeliveries({ owner: 'new-worker', limit: 10, leaseMs: 60_000, now: t0 + 2 });
      assert.deepEqual(again.map((d) => d.id).sort(), dead.map((d) => d.id).sort(), "the dead worker's jobs, not the caller's own");
      // The dead worker's late outcome is ignored: the lease is no longer its.
      await store.finishDeliveries([{ kind: 'succeeded', id: dead[0]!.id, owner: 'dead-worker', at: t0 + 3, firstAttemptAt: t0, attempts: [] }]);
      assert.equal((await store.getDelivery(dead[0]!.id))!.status, 'pending');
    } finally {
      await store.close();
    }
  });
});
