import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ComputationRecord, EngageBatch, ProfileWrite, Store } from '../../src/store/store.js';
import { addSource, storeEntry, T0 } from '../helpers/store-fixtures.js';

/** The Store contract of Engage (computations, profiles, the evaluator's commits), one suite every adapter runs. */
export function describeEngageContract(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  void describe(`Store contract, engage: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;

    const computation = (id: string, key: string): ComputationRecord => ({
      id,
      kind: 'audience',
      name: key,
      key,
      definition: { performed: { event: 'Order Completed' } },
      destinations: ['src_engage'],
      status: 'computing',
      version: 1,
      createdAt: T0,
      updatedAt: T0,
    });
    const profile = (id: string, expectedVersion: number, overrides: Partial<ProfileWrite> = {}): ProfileWrite => ({
      id,
      expectedVersion,
      state: JSON.stringify({ id }),
      identifiers: [],
      membershipChanges: [],
      computedTraits: {},
      recentSeqs: [],
      nextExpiry: undefined,
      ...overrides,
    });
    const batch = (overrides: Partial<EngageBatch>): EngageBatch => ({ deletedProfiles: [], profiles: [], messages: [], at: T0, ...overrides });

    before(async () => {
      ({ store, cleanup } = await open());
      await addSource(store, 'src_engage');
    });
    after(async () => {
      await cleanup();
    });

    void it('stores computations with unique keys; a definition change makes one computing again at a new version', async () => {
      assert.equal(await store.insertComputation(computation('aud_1', 'buyers')), true);
      assert.equal(await store.insertComputation(computation('aud_2', 'buyers')), false, 'the key is taken');
      const changed = await store.updateComputation('aud_1', { definition: { trait: { key: 'plan', op: 'exists' } } }, T0 + 1);
      assert.deepEqual([changed?.version, changed?.status, changed?.definition], [2, 'computing', { trait: { key: 'plan', op: 'exists' } }]);
      const renamed = await store.updateComputation('aud_1', { name: 'Buyers' }, T0 + 2);
      assert.deepEqual([renamed?.version, renamed?.name, renamed?.key], [2, 'Buyers', 'buyers']);
      assert.equal(await store.commitEngage(batch({ computationsLive: [{ id: 'aud_1', version: 1 }] })), false, 'an old version is not marked live');
      assert.equal(await store.commitEngage(batch({ computationsLive: [{ id: 'aud_1', version: 2 }] })), true);
      assert.equal((await store.getComputation('aud_1'))?.status, 'live');
      assert.deepEqual((await store.listComputations('audience')).map((c) => [c.id, c.size]), [['aud_1', 0]]);
      assert.deepEqual(await store.listComputations('trait'), []);
      assert.equal(await store.updateComputation('aud_missing', { name: 'x' }, T0), undefined);
    });

    void it('commits profiles with a version check and a conditional cursor, all or nothing', async () => {
      const cursor = await store.getEngageCursor();
      assert.equal(cursor, 0);
      assert.equal(await store.oldestUnevaluatedMessage(), undefined, 'no message: nothing behind');
      const [appended] = await store.appendMessages([storeEntry('src_engage', { receivedAt: T0 + 5 })], 0);
      assert.deepEqual(await store.oldestUnevaluatedMessage(), { seq: appended!.seq, receivedAt: T0 + 5 }, 'the message past the cursor');
      const sync = storeEntry('src_engage', { type: 'identify', reason: 'engage:buyers' });
      const first = batch({
        cursor: { from: 0, to: appended!.seq, erasures: 0 },
        profiles: [profile('p1', 0, { identifiers: ['user_id:u1', 'anonymous_id:a1'], membershipChanges: [{ computationId: 'aud_1', member: true }], computedTraits: { ct_1: ['x', 2] }, recentSeqs: [appended!.seq], nextExpiry: T0 + 10 })],
        messages: [sync],
      });
      assert.equal(await store.commitEngage(first), true);
      assert.equal(await store.commitEngage(first), false, 'the cursor moved and p1 exists: nothing is written twice');
      assert.equal(await store.getEngageCursor(), appended!.seq);
      const [p1] = await store.getProfiles(['p1']);
      assert.deepEqual([p1?.version, p1?.identifiers, p1?.outputs, p1?.recentSeqs, p1?.nextExpiry], [1, ['anonymous_id:a1', 'user_id:u1'], { aud_1: true, ct_1: ['x', 2] }, [appended!.seq], T0 + 10]);
      assert.deepEqual(await store.listComputationMembers('ct_1', 10), [], 'trait values are kept on the profile, not as member rows');
      const queued = await store.listDeliveries({ sourceId: 'src_engage', limit: 10 });
      assert.equal(queued.length, 2, 'the appended track and the sync each have a delivery');
      const since = await store.listMessagesSince(0, 10);
      assert.deepEqual(since.map((m) => m.reason), [undefined, 'engage:buyers']);
      assert.deepEqual(await store.oldestUnevaluatedMessage(), { seq: since[1]!.seq, receivedAt: sync.receivedAt }, 'the cursor passed the track; the sync it queued is next');
      assert.deepEqual((await store.listMessagesSince(0, 10, appended!.seq)).length, 1);
      assert.deepEqual((await store.getMessagesBySeq([appended!.seq])).map((m) => m.seq), [appended!.seq]);

      // A stale version writes nothing, not even its messages.
      const stale = batch({ profiles: [profile('p1', 7)], messages: [storeEntry('src_engage')] });
      assert.equal(await store.commitEngage(stale), false);
      assert.equal((await store.listMessagesSince(0, 10)).length, 2);
      const mixed = batch({ profiles: [profile('p9', 0, { identifiers: ['user_id:u9'], membershipChanges: [{ computationId: 'aud_1', member: true }] }), profile('p1', 7)] });
      assert.equal(await store.commitEngage(mixed), false, 'one stale profile refuses the whole batch');
      assert.deepEqual([await store.getProfiles(['p9']), Object.fromEntries(await store.findProfileIds(['user_id:u9']))], [[], {}]);

      assert.deepEqual(Object.fromEntries(await store.findProfileIds(['user_id:u1', 'user_id:nobody'])), { 'user_id:u1': 'p1' });
      assert.deepEqual(await store.listExpiredProfileIds(T0 + 10, 10), ['p1']);
      assert.deepEqual(await store.listExpiredProfileIds(T0 + 9, 10), []);
      const members = await store.listComputationMembers('aud_1', 10);
      assert.deepEqual(members.map((m) => [m.profileId, m.value, m.identifiers]), [['p1', true, ['anonymous_id:a1', 'user_id:u1']]]);
      assert.equal((await store.getComputation('aud_1'))?.size, 1);
    });

    void it('merges: deleting one profile and moving its identifiers to another in one commit', async () => {
      assert.equal(await store.commitEngage(batch({ profiles: [profile('p2', 0, { identifiers: ['user_id:u2'], membershipChanges: [{ computationId: 'aud_1', member: true }] })] })), true);
      const merged = batch({
        deletedProfiles: [{ id: 'p2', expectedVersion: 1 }],
        profiles: [profile('p1', 1, { identifiers: ['user_id:u1', 'anonymous_id:a1', 'user_id:u2'] })],
      });
      assert.equal(await store.commitEngage(merged), true);
      assert.deepEqual(await store.getProfiles(['p2']), []);
      assert.deepEqual((await store.getProfiles(['p1']))[0]?.identifiers, ['anonymous_id:a1', 'user_id:u1', 'user_id:u2']);
      assert.deepEqual((await store.listComputationMembers('aud_1', 10)).map((m) => m.profileId), ['p1'], "the merged profile's outputs went with it");
      assert.deepEqual(await store.listProfileIds('', 10), ['p1']);
      const cleared = batch({ profiles: [profile('p1', 2, { membershipChanges: [{ computationId: 'aud_1', member: false }] })] });
      assert.equal(await store.commitEngage(cleared), true);
      assert.deepEqual(await store.listComputationMembers('aud_1', 10), []);
      assert.deepEqual((await store.getProfiles(['p1']))[0]?.outputs, {}, 'a write replaces the trait values stored with the profile');
      assert.equal(await store.deleteComputation('aud_1'), true);
      assert.equal(await store.deleteComputation('aud_1'), false);
    });

    void it("lists an audience's members in the order they joined (then by profile id), a page at a time; one that leaves and comes back joins again", async () => {
      assert.equal(await store.insertComputation(computation('aud_join', 'joiners')), true);
      const join = (id: string, version: number, at: number, member = true): Promise<boolean> =>
        store.commitEngage(batch({ at, profiles: [profile(id, version, { identifiers: [`user_id:${id}`], membershipChanges: [{ computationId: 'aud_join', member }] })] }));
      assert.equal(await join('pj_c', 0, T0 + 5), true);
      assert.equal(await join('pj_b', 0, T0 + 7), true);
      assert.equal(await join('pj_a', 0, T0 + 7), true);
      assert.equal(await join('pj_d', 0, T0 + 3), true);
      const ids = (members: ReadonlyArray<{ profileId: string }>): string[] => members.map((m) => m.profileId);
      const first = await store.listComputationMembers('aud_join', 2);
      assert.deepEqual(first.map((m) => [m.profileId, m.since]), [['pj_d', T0 + 3], ['pj_c', T0 + 5]]);
      const second = await store.listComputationMembers('aud_join', 2, first[1]);
      assert.deepEqual(ids(second), ['pj_a', 'pj_b'], 'the same time: by profile id');
      assert.deepEqual(await store.listComputationMembers('aud_join', 2, second[1]), []);
      assert.deepEqual(ids(await store.listComputationMembers('aud_join', 10, { since: T0 + 7, profileId: 'pj_a' })), ['pj_b'], 'after a position, whichever page it ended');

      assert.equal(await join('pj_d', 1, T0 + 8, false), true);
      assert.equal(await join('pj_d', 2, T0 + 9), true);
      assert.deepEqual(ids(await store.listComputationMembers('aud_join', 10)), ['pj_c', 'pj_a', 'pj_b', 'pj_d']);
    });

    void it('gives the evaluator lease to one owner at a time until it expires or is released', async () => {
      assert.equal(await store.claimEngageLease('node-a', T0, 1_000), true);
      assert.equal(await store.claimEngageLease('node-b', T0 + 500, 1_000), false);
      assert.equal(await store.claimEngageLease('node-a', T0 + 500, 1_000), true, 'renewed');
      assert.equal(await store.claimEngageLease('node-b', T0 + 1_501, 1_000), true, 'expired, taken over');
      await store.releaseEngageLease('node-a');
      assert.equal(await store.claimEngageLease('node-a', T0 + 1_600, 1_000), false, 'releasing someone else’s lease does nothing');
      await store.releaseEngageLease('node-b');
      assert.equal(await store.claimEngageLease('node-a', T0 + 1_600, 1_000), true);
    });

    void it('frees a dead owner’s lease at start only on a single-node store', async () => {
      assert.equal(await store.claimEngageLease('dead-run', T0 + 10_000, 60_000), true);
      assert.equal(await store.releaseStaleEngageLease('new-run'), store.capabilities.releasesLeases);
      assert.equal(await store.claimEngageLease('new-run', T0 + 10_001, 1_000), store.capabilities.releasesLeases);
      // Never one's own lease.
      assert.equal(await store.releaseStaleEngageLease(store.capabilities.releasesLeases ? 'new-run' : 'dead-run'), false);
    });
  });
}
