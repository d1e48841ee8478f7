import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Sync {
  type: string;
  userId?: string;
  timestamp: string;
  traits: Record<string, unknown>;
  context?: { personas?: { computation_key: string } };
}

/** The last value of `key` each user id got, in order of arrival (of the requests from the `from`th on). */
function lastValues(receiver: TestReceiver, key: string, from = 0): Map<string, unknown> {
  const last = new Map<string, unknown>();
  for (const request of receiver.requests.slice(from)) {
    const sync = JSON.parse(request.body) as Sync;
    if (sync.type !== 'identify' || sync.context?.personas?.computation_key !== key || sync.userId === undefined) continue;
    last.set(sync.userId, sync.traits[key]);
  }
  return last;
}

/** `switchyard_engage_lag_seconds` on `/metrics`: 0 once Engage has evaluated every stored message. */
async function engageLag(sy: TestSwitchyard): Promise<number | undefined> {
  const text = await (await fetch(`${sy.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('switchyard_engage_lag_seconds '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

function identitySuite(name: string, flags: () => Record<string, string>): void {
  describe(`Engage syncs per user id and deleted audiences: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
      source = await sy.createSource('shop');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    });
    after(async () => {
      receiver?.release(200);
      await sy?.close();
      await receiver?.close();
    });

    it('after a merge, every user id of the profile ends at its value (zed/abe/yan/bob)', { timeout: 60_000 }, async () => {
      // A trait audience: every change below comes from a message, none from time passing, so nothing here races a clock.
      const created = await sy.admin('POST', '/audiences', { name: 'Pros', key: 'pros', definition: { trait: { key: 'plan', op: '=', value: 'pro' } }, destinations: [source.id] });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.id as string;
      await eventually(async () => ((await sy.admin('GET', `/audiences/${id}`)).body.status === 'live' ? true : undefined), 10_000, 'live');
      const identify = (userId: string, plan: string) => ({ type: 'identify', userId, traits: { plan } });
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: [identify('zed', 'pro'), identify('abe', 'pro'), identify('yan', 'pro')] })).status, 200);
      await eventually(() => (['zed', 'abe', 'yan'].every((u) => lastValues(receiver, 'pros').get(u) === true) ? true : undefined), 20_000, 'all three in');

      // zed merges into abe's profile; yan's profile gains bob (new). A merge or a new user id resends the
      // profile's memberships to every user id it has: zed and abe, yan and bob.
      const beforeAliases = receiver.requests.length;
      assert.equal((await sy.send('/v1/alias', source.writeKey, { previousId: 'zed', userId: 'abe' })).status, 200);
      assert.equal((await sy.send('/v1/alias', source.writeKey, { previousId: 'yan', userId: 'bob' })).status, 200);
      const ids = ['zed', 'abe', 'yan', 'bob'];
      const sentSinceAliases = (): Map<string, unknown> => lastValues(receiver, 'pros', beforeAliases);
      await eventually(() => (ids.every((u) => sentSinceAliases().get(u) === true) ? true : undefined), 20_000, 'every user id sent true at the merges').catch(() => undefined);
      assert.deepEqual(Object.fromEntries(ids.map((u) => [u, sentSinceAliases().get(u)])), { zed: true, abe: true, yan: true, bob: true }, 'sent at the merges');
      assert.deepEqual((await sy.admin('GET', '/profiles/user_id:zed')).body.identifiers, ['user_id:abe', 'user_id:zed']);
      assert.deepEqual((await sy.admin('GET', '/profiles/user_id:bob')).body.identifiers, ['user_id:bob', 'user_id:yan']);

      // Each merged profile leaves the audience, by a message naming only one of its user ids (abe, bob):
      // every user id of both profiles must end false, merged-away zed and yan included.
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: [identify('abe', 'free'), identify('bob', 'free')] })).status, 200);
      await eventually(() => (ids.every((u) => lastValues(receiver, 'pros').get(u) === false) ? true : undefined), 20_000, 'every id false').catch(() => undefined);
      // Ends there: Engage has evaluated every message (lag 0, so every sync is queued) and no delivery is left.
      await eventually(async () => ((await engageLag(sy)) === 0 ? true : undefined), 20_000, 'Engage caught up');
      await eventually(async () => ((await sy.admin('GET', '/deliveries?status=pending&limit=1')).body.deliveries.length === 0 ? true : undefined), 20_000, 'no delivery pending');
      assert.deepEqual(Object.fromEntries(ids.map((u) => [u, lastValues(receiver, 'pros').get(u)])), { zed: false, abe: false, yan: false, bob: false });
      for (const u of ids) assert.deepEqual((await sy.admin('GET', `/profiles/user_id:${u}`)).body.audiences, [], `${u}'s profile`);
    });

    it('deleting an audience during its first sync sends nothing more and leaves no rows', { timeout: 240_000 }, async () => {
      const batch = Array.from({ length: 400 }, (_, i) => ({ type: 'identify', userId: `member-${i}`, traits: { tier: 'gold' } }));
      for (let i = 0; i < batch.length; i += 100) assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: batch.slice(i, i + 100) })).status, 200);
      await eventually(async () => ((await sy.admin('GET', '/profiles/user_id:member-399')).status === 200 ? true : undefined), 20_000, 'profiles');
      // Every request hangs: the first deliveries stay in flight, the others wait in the queue.
      receiver.reply = () => ({ hang: true });
      const created = await sy.admin('POST', '/audiences', { name: 'Gold', key: 'gold', definition: { trait: { key: 'tier', op: '=', value: 'gold' } }, destinations: [source.id] });
      assert.equal(created.status, 201);
      const id = created.body.id as string;
      await eventually(() => (lastValues(receiver, 'gold').size > 0 ? true : undefined), 60_000, 'the first sync under way');
      const deleted = await sy.admin('DELETE', `/audiences/${id}`);
      assert.equal(deleted.status, 204);
      const sentBefore = lastValues(receiver, 'gold').size;
      receiver.release(200);
      receiver.reply = () => ({ status: 200 });
      // A later audience's sync goes through the same queue: once it is delivered, whatever was queued before it was too.
      const later = await sy.admin('POST', '/audiences', { name: 'Member zero', key: 'member_zero', definition: { trait: { key: 'tier', op: 'exists' } }, destinations: [source.id] });
      assert.equal(later.status, 201);
      await eventually(() => (lastValues(receiver, 'member_zero').size === 400 ? true : undefined), 30_000, 'the later audience synced');
      // Deliveries whose hung POSTs timed out are retried with backoff: on a loaded machine that takes a while.
      await eventually(async () => ((await sy.admin('GET', '/deliveries?status=pending&limit=1')).body.deliveries.length === 0 ? true : undefined), 90_000, 'queue empty');
      // In flight: the POSTs hung at the receiver and the deliveries the worker had claimed and holds for a
      // slot of the receiver (at most its 256 in flight); the rest of the 400 must never be sent.
      const sent = lastValues(receiver, 'gold').size;
      assert.ok(sent - sentBefore <= 256 && sent < 400, `${sent} of 400 sent, ${sentBefore} before the 204`);
      assert.deepEqual(await sy.store.listComputationMembers(id, 10), [], 'no member rows of the deleted audience');
    });
  });
}

identitySuite('sqlite', () => ({}));

await describePostgres('Engage syncs per user id on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  identitySuite('postgres', () => ({ 'database-url': db.url }));
});
