import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const MEMBERS = 400;

interface Posted {
  type: string;
  event?: string;
  userId?: string;
  traits?: Record<string, unknown>;
  context?: { personas?: { computation_key: string } };
}

function posted(receiver: TestReceiver): Posted[] {
  return receiver.requests.map((request) => JSON.parse(request.body) as Posted);
}

/** The users whose `gold` sync reached the receiver. */
function goldSynced(receiver: TestReceiver): Set<string> {
  return new Set(posted(receiver).filter((p) => p.type === 'identify' && p.context?.personas?.computation_key === 'gold').map((p) => p.userId!));
}

/**
 * Issue 29, "Deleting an audience does not stop its first sync", for a
 * Webhooks destination that orders per user: its syncs are links of each
 * user's chain (none may simply be dropped), so a delete must stop them
 * without stranding what waits behind them.
 */
function orderedDeleteSuite(name: string, flags: () => Record<string, string>): void {
  describe(`deleting an audience stops its first sync to an ordered Webhooks destination: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };

    before(async () => {
      receiver = await startReceiver();
      // Short backoff, long window: a POST that hung past its timeout is retried soon, never failed for being late.
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '20', 'retry-max-delay-ms': '200', 'retry-window-ms': '120000', ...flags() });
      source = await sy.createSource('shop');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }], ordering: 'user' } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    });
    after(async () => {
      receiver?.release(200);
      await sy?.close();
      await receiver?.close();
    });

    it('sends nothing more after the 204 but what was in flight, and the users\' later messages still arrive in order', { timeout: 240_000 }, async () => {
      const batch = Array.from({ length: MEMBERS }, (_, i) => ({ type: 'identify', userId: `member-${i}`, traits: { tier: 'gold' } }));
      for (let i = 0; i < batch.length; i += 100) assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: batch.slice(i, i + 100) })).status, 200);
      await receiver.waitFor(MEMBERS, 60_000);
      await eventually(async () => ((await sy.admin('GET', `/profiles/user_id:member-${MEMBERS - 1}`)).status === 200 ? true : undefined), 30_000, 'profiles');
      // Every request hangs: the first syncs stay in flight, the others wait in the queue.
      receiver.reply = () => ({ hang: true });
      const created = await sy.admin('POST', '/audiences', { name: 'Gold', key: 'gold', definition: { trait: { key: 'tier', op: '=', value: 'gold' } }, destinations: [source.id] });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.id as string;
      // Every member's sync queued (the audience is live once its first sync is), the first ones hung at the receiver.
      await eventually(async () => ((await sy.admin('GET', `/audiences/${id}`)).body.status === 'live' ? true : undefined), 60_000, 'the first sync queued');
      await eventually(() => (goldSynced(receiver).size > 0 ? true : undefined), 60_000, 'the first sync under way');
      const deleted = await sy.admin('DELETE', `/audiences/${id}`);
      assert.equal(deleted.status, 204);
      const sentBefore = goldSynced(receiver).size;
      // Each member's next message is ordered behind its (deleted) sync.
      const pings = Array.from({ length: MEMBERS }, (_, i) => ({ type: 'track', userId: `member-${i}`, event: 'Ping' }));
      for (let i = 0; i < pings.length; i += 100) assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: pings.slice(i, i + 100) })).status, 200);
      receiver.release(200);
      receiver.reply = () => ({ status: 200 });
      // Nothing stranded: every member's Ping arrives (a chain waiting on a sync that is never sent would hold it for ever).
      await eventually(() => (posted(receiver).filter((p) => p.event === 'Ping').length >= MEMBERS ? true : undefined), 120_000, 'every Ping delivered');
      await eventually(async () => ((await sy.admin('GET', '/deliveries?status=pending&limit=1')).body.deliveries.length === 0 ? true : undefined), 60_000, 'queue empty');
      const sent = goldSynced(receiver).size;
      // In flight at the delete: the POSTs hung at the receiver and those the worker held for a slot (at most 256 a receiver).
      assert.ok(sent - sentBefore <= 256 && sent < MEMBERS, `${sent} of ${MEMBERS} synced, ${sentBefore} before the 204`);
      // Each member's order holds: a gold sync that was sent came before its Ping.
      const all = posted(receiver);
      for (const userId of goldSynced(receiver)) {
        const sync = all.findIndex((p) => p.userId === userId && p.context?.personas?.computation_key === 'gold');
        const ping = all.findIndex((p) => p.userId === userId && p.event === 'Ping');
        assert.ok(sync < ping, `${userId}: its sync after its Ping`);
      }
      // Every sync not sent says why; nothing else failed.
      const failed = (await sy.admin('GET', `/deliveries?sourceId=${source.id}&status=failed&limit=500`)).body.deliveries as Array<{ lastError?: string }>;
      assert.ok(failed.length >= MEMBERS - sent, `${failed.length} failed deliveries, ${MEMBERS - sent} members not synced`);
      assert.ok(failed.every((d) => d.lastError === 'not sent: its audience was deleted'), JSON.stringify(failed.slice(0, 2)));
      assert.deepEqual(await sy.store.listComputationMembers(id, 10), [], 'no member rows of the deleted audience');
    });
  });
}

orderedDeleteSuite('sqlite', () => ({}));

await describePostgres('deleting an audience stops its first sync to an ordered Webhooks destination on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  orderedDeleteSuite('postgres', () => ({ 'database-url': db.url }));
});
