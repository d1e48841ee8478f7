import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EngageBatch, Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';

/**
 * A forced interleaving of a backfill and a DELETE_ONLY regulation, driven
 * step by step on the store the way the evaluator and the regulation runner
 * call it: the backfill reads the user's profile, the regulation's step
 * commits (its `delete` message queued), then the backfill commits the
 * profile with a sync for the user. That commit must be refused: nothing of
 * an erased user may be queued after its delete.
 */
function erasureSuite(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  describe(`Engage erasure against a backfill: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    before(async () => {
      ({ store, cleanup } = await open());
    });
    after(async () => cleanup?.());

    it('refuses the backfill commit of a profile a regulation erased after it was read', async () => {
      await addSource(store, 'src');
      const audience = { id: 'aud_1', kind: 'audience' as const, name: 'Pro', key: 'pro', definition: { trait: { key: 'plan', op: '=', value: 'pro' } }, destinations: ['src'], status: 'computing' as const, version: 1, createdAt: T0, updatedAt: T0 };
      assert.equal(await store.insertComputation(audience), true);
      const profile = (version: number): EngageBatch['profiles'][number] => ({
        id: 'prf_1',
        expectedVersion: version,
        state: '{}',
        identifiers: version === 0 ? ['user_id:gone'] : [],
        membershipChanges: version === 0 ? [] : [{ computationId: 'aud_1', member: true }],
        computedTraits: {},
        recentSeqs: [],
        nextExpiry: undefined,
      });
      assert.equal(await store.commitEngage({ deletedProfiles: [], profiles: [profile(0)], messages: [], at: T0 }), true);
      // 1. The backfill reads the profile (version 1).
      const [read] = await store.getProfiles(['prf_1']);
      assert.equal(read?.version, 1);
      // 2. The regulation runs its step: the user's messages erased, its delete queued.
      await store.createRegulation({ id: 'reg_1', regulationType: 'DELETE_ONLY', subjectIds: ['gone'], sourceIds: undefined, stepSourceIds: ['src'], createdAt: T0 });
      const deleteMessage = storeEntry('src', { type: 'delete', userId: 'gone', body: JSON.stringify({ type: 'delete', userId: 'gone' }) });
      assert.equal(await store.runRegulationStep({ regulationId: 'reg_1', sourceId: 'src', eraseUserIds: ['gone'], messages: [deleteMessage], at: T0 + 1 }), true);
      // 3. The backfill commits what it computed from its read, with the user's sync.
      const sync = storeEntry('src', {
        type: 'identify',
        userId: 'gone',
        reason: 'engage:pro',
        receivedAt: T0 + 2,
        body: JSON.stringify({ type: 'identify', userId: 'gone', traits: { pro: true } }),
        engageSync: { computationId: 'aud_1', key: 'u:gone' },
      });
      const committed = await store.commitEngage({
        deletedProfiles: [],
        profiles: [profile(1)],
        messages: [sync],
        at: T0 + 2,
        computations: [{ id: 'aud_1', version: 1 }],
      });
      assert.equal(committed, false, 'the erased profile cannot be written back, nor its sync queued');
      const queued = await store.listDeliveries({ limit: 10 });
      assert.deepEqual(queued.map((d) => d.messageId), [deleteMessage.messageId], 'only the delete is queued');
      assert.deepEqual(await store.getProfiles(['prf_1']), []);
      assert.deepEqual((await store.findProfileIds(['user_id:gone'])).size, 0);
      assert.deepEqual(await store.listComputationMembers('aud_1', 10), []);
    });

    it('refuses the stream commit of a profile made of messages a regulation erased after the page was read', async () => {
      // The user has messages but no profile yet: the page makes one, which no version check can fence.
      const [track] = await store.appendMessages([storeEntry('src', { userId: 'late', body: JSON.stringify({ type: 'track', userId: 'late', event: 'Signed Up' }) })], 0);
      // 1. The evaluator reads its position, then the page holding the user's message.
      const position = await store.getEngageStreamPosition();
      const page = await store.listMessagesSince(position.cursor, 500);
      assert.ok(page.some((m) => m.seq === track!.seq));
      // 2. The regulation runs its step: the user's messages erased (no profile to erase yet), its delete queued.
      await store.createRegulation({ id: 'reg_2', regulationType: 'DELETE_ONLY', subjectIds: ['late'], sourceIds: undefined, stepSourceIds: ['src'], createdAt: T0 });
      const deleteMessage = storeEntry('src', { type: 'delete', userId: 'late', body: JSON.stringify({ type: 'delete', userId: 'late' }) });
      assert.equal(await store.runRegulationStep({ regulationId: 'reg_2', sourceId: 'src', eraseUserIds: ['late'], messages: [deleteMessage], at: T0 + 3 }), true);
      // 3. The evaluator commits the page: a new profile for the user, and its sync.
      const sync = storeEntry('src', {
        type: 'identify',
        userId: 'late',
        reason: 'engage:pro',
        receivedAt: T0 + 4,
        body: JSON.stringify({ type: 'identify', userId: 'late', traits: { pro: true } }),
        engageSync: { computationId: 'aud_1', key: 'u:late' },
      });
      const newProfile = { id: 'prf_late', expectedVersion: 0, state: '{}', identifiers: ['user_id:late'], membershipChanges: [{ computationId: 'aud_1', member: true }], computedTraits: {}, recentSeqs: [track!.seq], nextExpiry: undefined };
      const stream = { cursor: { from: position.cursor, to: page.at(-1)!.seq, erasures: position.erasures }, deletedProfiles: [], profiles: [newProfile], messages: [sync], at: T0 + 4, computations: [{ id: 'aud_1', version: 1 }] };
      assert.equal(await store.commitEngage(stream), false, 'a profile of the erased user cannot be made after its erasure, nor its sync queued');
      assert.deepEqual(await store.getProfiles(['prf_late']), []);
      assert.equal((await store.findProfileIds(['user_id:late'])).size, 0);
      const queued = await store.listDeliveries({ limit: 20 });
      assert.ok(!queued.some((d) => d.messageId === sync.messageId), 'no sync of the erased user queued');
      // Read again, the page no longer holds the user's message; its commit goes through.
      const again = await store.getEngageStreamPosition();
      assert.equal(again.erasures, position.erasures + 1);
      const redone = await store.listMessagesSince(again.cursor, 500);
      assert.ok(!redone.some((m) => m.seq === track!.seq), 'the erased message is gone');
      assert.equal(await store.commitEngage({ cursor: { from: again.cursor, to: redone.at(-1)!.seq, erasures: again.erasures }, deletedProfiles: [], profiles: [], messages: [], at: T0 + 5 }), true);
    });
  });
}

erasureSuite('sqlite', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-erasure-'));
  const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
  await store.migrate();
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

await describePostgres('Engage erasure against a backfill on PostgreSQL', () => {
  erasureSuite('postgres', async () => {
    const db: FreshDatabase = await freshDatabase();
    const store = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    await store.migrate();
    return {
      store,
      cleanup: async () => {
        await store.close();
        await db.drop();
      },
    };
  });
});
