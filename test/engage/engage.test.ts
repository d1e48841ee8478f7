import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type ReceivedRequest, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Sync {
  userId?: string;
  anonymousId?: string;
  traits: Record<string, unknown>;
  context: { personas: { computation_class: string; computation_id: string; computation_key: string; space_id: string; namespace: string } };
}

/** The Engage identifies a receiver got (those with context.personas), parsed. */
const syncsOf = (receiver: TestReceiver, key?: string): Sync[] =>
  receiver.requests
    .map((r: ReceivedRequest) => JSON.parse(r.body) as Sync & { type: string })
    .filter((m) => m.type === 'identify' && m.context?.personas !== undefined && (key === undefined || m.context.personas.computation_key === key));

/** The end-to-end Engage behaviour, on whichever store `flags` choose. */
function engageSuite(name: string, flags: () => Record<string, string>): void {
  describe(`Engage end to end: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };

    const track = (userId: string, event: string, properties: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
      sy.send('/v1/track', source.writeKey, { userId, event, properties, ...extra });

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
      source = await sy.createSource('shop');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    it('sends repeat buyers as identify true when they enter and false when the window expires', { timeout: 60_000 }, async () => {
      const created = await sy.admin('POST', '/audiences', {
        name: 'Repeat Buyers',
        definition: { performed: { event: 'Order Completed', within: '3s', count: { op: '>=', value: 2 } } },
        destinations: [source.id],
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.equal(created.body.key, 'repeat_buyers');
      assert.match(created.body.id, /^aud_/);
      const id = created.body.id as string;
      await eventually(async () => ((await sy.admin('GET', `/audiences/${id}`)).body.status === 'live' ? true : undefined), 10_000, 'live');

      assert.equal((await track('buyer-1', 'Order Completed')).status, 200);
      assert.equal((await track('buyer-1', 'Order Completed')).status, 200);
      assert.equal((await track('browser-1', 'Order Completed')).status, 200);
      const entered = await eventually(() => syncsOf(receiver, 'repeat_buyers').find((s) => s.userId === 'buyer-1' && s.traits['repeat_buyers'] === true), 10_000, 'identify true');
      assert.deepEqual(entered.context.personas, {
        computation_class: 'audience',
        computation_id: id,
        computation_key: 'repeat_buyers',
        namespace: 'default',
        space_id: 'default',
      });
      const members = await sy.admin('GET', `/audiences/${id}/members`);
      assert.deepEqual(members.body.members.map((m: { userId: string }) => m.userId), ['buyer-1']);
      assert.equal((await sy.admin('GET', `/audiences/${id}`)).body.size, 1);
      const profile = await sy.admin('GET', '/profiles/user_id:buyer-1');
      assert.equal(profile.status, 200);
      assert.deepEqual(profile.body.audiences, ['repeat_buyers']);

      // Three seconds after the orders, the window has slid past them: the scheduler notices without a new message.
      const left = await eventually(() => syncsOf(receiver, 'repeat_buyers').find((s) => s.userId === 'buyer-1' && s.traits['repeat_buyers'] === false), 15_000, 'identify false');
      assert.ok(left);
      assert.deepEqual((await sy.admin('GET', `/audiences/${id}/members`)).body.members, []);
      assert.equal(syncsOf(receiver, 'repeat_buyers').filter((s) => s.userId === 'browser-1').length, 0, 'one order is not enough');
      assert.equal(syncsOf(receiver, 'repeat_buyers').filter((s) => s.userId === 'buyer-1').length, 2, 'exactly one true and one false');
    });

    it('computes traits, merges profiles via alias, and backfills a new computation over stored history', { timeout: 60_000 }, async () => {
      await sy.send('/v1/track', source.writeKey, { anonymousId: 'anon-7', event: 'Viewed', properties: { sku: 'a' } });
      await sy.send('/v1/identify', source.writeKey, { userId: 'shopper-7', traits: { plan: 'pro' } });
      await track('shopper-7', 'Spent', { revenue: 30 });
      await track('shopper-7', 'Spent', { revenue: 12 });
      await sy.send('/v1/alias', source.writeKey, { userId: 'shopper-7', previousId: 'anon-7' });
      await eventually(async () => {
        const { status, body } = await sy.admin('GET', '/profiles/anonymous_id:anon-7');
        return status === 200 && body.identifiers.includes('user_id:shopper-7') ? true : undefined;
      }, 10_000, 'the alias to merge the profiles');

      // Created after the messages: computed over what is stored.
      const spent = await sy.admin('POST', '/computed-traits', {
        name: 'Total Spent',
        definition: { type: 'aggregation', fn: 'sum', event: 'Spent', property: 'revenue' },
        destinations: [source.id],
      });
      assert.equal(spent.status, 201, JSON.stringify(spent.body));
      const viewed = await sy.admin('POST', '/computed-traits', {
        name: 'Viewed SKUs',
        key: 'viewed_skus',
        definition: { type: 'unique_list', event: 'Viewed', property: 'sku' },
        destinations: [source.id],
      });
      assert.equal(viewed.status, 201, JSON.stringify(viewed.body));
      const sync = await eventually(() => syncsOf(receiver, 'total_spent').find((s) => s.userId === 'shopper-7'), 10_000, 'the backfilled trait');
      assert.equal(sync.traits['total_spent'], 42);
      assert.equal(sync.context.personas.computation_class, 'trait');
      const skus = await eventually(() => syncsOf(receiver, 'viewed_skus').find((s) => s.userId === 'shopper-7'), 10_000, 'the merged history');
      assert.deepEqual(skus.traits['viewed_skus'], ['a'], "the anonymous profile's events count after the merge");

      await track('shopper-7', 'Spent', { revenue: 8 });
      await eventually(() => syncsOf(receiver, 'total_spent').find((s) => s.traits['total_spent'] === 50), 10_000, 'the change');
      // One identify per member for the backfill, then one per change: the backfill ran once, not again on every
      // pass until the definitions were next read (it sent the same identify 14 to 18 times).
      assert.deepEqual(syncsOf(receiver, 'total_spent').filter((s) => s.userId === 'shopper-7').map((s) => s.traits['total_spent']), [42, 50]);
      assert.equal(syncsOf(receiver, 'viewed_skus').filter((s) => s.userId === 'shopper-7').length, 1);
      const profile = await sy.admin('GET', '/profiles/user_id:shopper-7');
      assert.deepEqual(profile.body.traits, { plan: 'pro' });
      assert.equal(profile.body.computedTraits.total_spent, 50);
      const events = await sy.admin('GET', '/profiles/user_id:shopper-7/events?limit=2');
      assert.deepEqual(events.body.events.map((e: { message: { type: string } }) => e.message.type), ['track', 'alias']);
    });

    it('sends an anonymous member with anonymousId alone, and again with the user id it gains', { timeout: 60_000 }, async () => {
      const created = await sy.admin('POST', '/audiences', { name: 'Viewers', definition: { performed: { event: 'Viewed Pricing' } }, destinations: [source.id] });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      await eventually(async () => ((await sy.admin('GET', `/audiences/${created.body.id}`)).body.status === 'live' ? true : undefined), 10_000, 'live');
      await sy.send('/v1/track', source.writeKey, { anonymousId: 'anon-9', event: 'Viewed Pricing' });
      const anonymous = await eventually(() => syncsOf(receiver, 'viewers').find((s) => s.anonymousId === 'anon-9'), 10_000, 'the anonymous sync');
      assert.equal(anonymous.userId ?? null, null, 'no user id (the webhook payload says null)');
      assert.equal(anonymous.traits['viewers'], true);
      await sy.send('/v1/identify', source.writeKey, { anonymousId: 'anon-9', userId: 'known-9', traits: { name: 'Nine' } });
      const known = await eventually(() => syncsOf(receiver, 'viewers').find((s) => s.userId === 'known-9'), 10_000, 'the sync with the user id');
      assert.deepEqual([known.anonymousId, known.traits['viewers']], ['anon-9', true]);
      assert.equal(syncsOf(receiver, 'viewers').length, 2, 'one sync each time');
    });

    it('answers invalid definitions with the field, key conflicts with 409, unknown profiles with 404', async () => {
      const bad = await sy.admin('POST', '/audiences', { name: 'Bad', definition: { performed: { event: 'X', where: [{ property: 'a', op: '~', value: 1 }] } } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_definition');
      assert.match(bad.body.error.message, /definition\.performed\.where\[0\]\.op/);
      const unknownKey = await sy.admin('POST', '/audiences', { name: 'Reads nothing', definition: { inAudience: 'nope' } });
      assert.equal(unknownKey.body.error.code, 'invalid_definition');
      const twice = await sy.admin('POST', '/audiences', { name: 'Repeat buyers', definition: { trait: { key: 'plan', op: 'exists' } } });
      assert.equal(twice.status, 409);
      assert.equal(twice.body.error.code, 'key_conflict');
      const missing = await sy.admin('GET', '/profiles/user_id:nobody');
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'profile_not_found');
      assert.equal((await sy.admin('GET', '/computed-traits/ct_nope')).status, 404);
    });

    it('erases a deleted user profile without sending false', { timeout: 60_000 }, async () => {
      const created = await sy.admin('POST', '/audiences', { name: 'Pro users', definition: { trait: { key: 'plan', op: '=', value: 'pro' } }, destinations: [source.id] });
      assert.equal(created.status, 201);
      await sy.send('/v1/identify', source.writeKey, { userId: 'leaving-1', traits: { plan: 'pro' } });
      await eventually(() => syncsOf(receiver, 'pro_users').find((s) => s.userId === 'leaving-1' && s.traits['pro_users'] === true), 10_000, 'entered');
      const regulation = await sy.admin('POST', '/regulations', { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: ['leaving-1'] });
      assert.equal(regulation.status, 201, JSON.stringify(regulation.body));
      await eventually(async () => ((await sy.admin('GET', '/profiles/user_id:leaving-1')).status === 404 ? true : undefined), 15_000, 'the profile erased');
      // A later message proves the evaluator went past the erasure.
      await track('someone-else', 'Ping');
      await eventually(async () => ((await sy.admin('GET', '/profiles/user_id:someone-else')).status === 200 ? true : undefined), 10_000, 'a later message applied');
      assert.equal(syncsOf(receiver, 'pro_users').filter((s) => s.userId === 'leaving-1' && s.traits['pro_users'] === false).length, 0);
      const id = created.body.id as string;
      const members = (await sy.admin('GET', `/audiences/${id}/members`)).body.members as Array<{ userId: string }>;
      assert.deepEqual(members.map((m) => m.userId), ['shopper-7'], 'the erased user is no member; the other pro user still is');
    });
  });
}

engageSuite('sqlite', () => ({}));

await describePostgres('Engage on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  engageSuite('postgres', () => ({ 'database-url': db.url }));
});
