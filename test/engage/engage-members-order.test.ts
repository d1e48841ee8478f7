import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ProfileWrite } from '../../src/store/store.js';
import { T0 } from '../helpers/store-fixtures.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/**
 * The members route pages an audience in the order its members joined. The
 * members are written straight into the store, with join times and profile
 * ids chosen so that join order and profile id order differ; the evaluator
 * leaves them alone (no message reaches them).
 */
describe('GET /audiences/:id/members: in the order members joined, paged with a cursor', () => {
  let sy: TestSwitchyard;
  let id = '';

  before(async () => {
    sy = await startTestSwitchyard();
    const created = await sy.admin('POST', '/audiences', { name: 'Joiners', definition: { performed: { event: 'Never Sent', count: { op: '>=', value: 1 } } } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    id = created.body.id;
    await eventually(async () => ((await sy.admin('GET', `/audiences/${id}`)).body.status === 'live' ? true : undefined), 10_000, 'live');
    const join = async (profileId: string, at: number): Promise<void> => {
      const profile: ProfileWrite = {
        id: profileId,
        expectedVersion: 0,
        state: '{}',
        identifiers: [`user_id:${profileId}`],
        membershipChanges: [{ computationId: id, member: true }],
        computedTraits: {},
        recentSeqs: [],
        nextExpiry: undefined,
      };
      assert.equal(await sy.store.commitEngage({ deletedProfiles: [], profiles: [profile], messages: [], at }), true);
    };
    await join('prf_z', T0 + 1_000);
    await join('prf_y', T0 + 2_000);
    await join('prf_x', T0 + 2_000);
  });

  after(async () => {
    await sy?.close();
  });

  it('lists the first to join first (the same time: by profile id), and the cursor carries on from there', async () => {
    const first = await sy.admin('GET', `/audiences/${id}/members?limit=2`);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(
      first.body.members.map((m: { userId: string; since: string }) => [m.userId, m.since]),
      [
        ['prf_z', new Date(T0 + 1_000).toISOString()],
        ['prf_x', new Date(T0 + 2_000).toISOString()],
      ],
    );
    assert.equal(typeof first.body.cursor, 'string');
    const second = await sy.admin('GET', `/audiences/${id}/members?limit=2&cursor=${first.body.cursor}`);
    assert.deepEqual(second.body, { members: [{ profileId: 'prf_y', userId: 'prf_y', since: new Date(T0 + 2_000).toISOString() }] });
  });

  it('refuses a cursor it did not give (such as a bare profile id, the cursor of older versions)', async () => {
    const old = await sy.admin('GET', `/audiences/${id}/members?cursor=${Buffer.from('prf_x').toString('base64url')}`);
    assert.equal(old.status, 400);
    assert.equal(old.body.error.code, 'invalid_request');
  });
});
