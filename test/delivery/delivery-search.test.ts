import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES } from '../helpers/webhooks.js';

interface Listed {
  id: number;
  sourceId: string;
  messageSeq: number;
  messageId?: string;
  type?: string;
  event?: string;
  userId?: string;
  anonymousId?: string;
  status: string;
}

/** A userId with what a URL must encode and what PostgreSQL's text cannot hold as it is (U+0000). */
const AWKWARD_USER = 'ü ser/1&x=\u0000';

/**
 * `GET /deliveries?userId=&messageId=`: the deliveries of the messages with
 * that id, each with its message's type, event and user, on whichever store
 * `flags` choose; and the message on its own (`GET /deliveries/:id`, the
 * debugger's `…/messages/:seq`).
 */
function searchSuite(name: string, flags: () => Record<string, string>): void {
  describe(`deliveries by user and messageId: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let shop: { id: string; writeKey: string };
    let app: { id: string; writeKey: string };
    const list = async (query: string): Promise<Listed[]> => {
      const answer = await sy.admin('GET', `/deliveries?${query}`);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer.body.deliveries as Listed[];
    };

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ ...FAST_RETRIES, ...flags() });
      shop = await sy.createSource('shop');
      app = await sy.createSource('app');
      for (const source of [shop, app]) {
        const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } });
        assert.equal(put.status, 200, JSON.stringify(put.body));
      }
      // One at a time, so that delivery ids follow this order.
      const sends: Array<[{ writeKey: string }, string, Record<string, unknown>]> = [
        [shop, '/v1/track', { userId: 'u1', messageId: 'shop-1', event: 'Order Completed', properties: { total: 42 } }],
        [shop, '/v1/identify', { userId: 'u2', messageId: 'shop-2', traits: { plan: 'pro' } }],
        [shop, '/v1/page', { anonymousId: 'anon-1', messageId: 'shop-3', name: 'Home' }],
        [app, '/v1/track', { userId: 'u1', messageId: 'app-1', event: 'Signed In' }],
        [app, '/v1/track', { userId: AWKWARD_USER, messageId: 'app-2', event: 'Odd' }],
      ];
      for (const [source, route, body] of sends) assert.equal((await sy.send(route, source.writeKey, body)).status, 200);
      await eventually(async () => ((await list('status=succeeded')).length === 5 ? true : undefined), 20_000, 'five deliveries to succeed');
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    it("shows each delivery's message type, event and user in the list", async () => {
      const all = await list('');
      const byMessage = new Map(all.map((d) => [d.messageId, d]));
      assert.deepEqual(pick(byMessage.get('shop-1')!), { type: 'track', event: 'Order Completed', userId: 'u1' });
      assert.deepEqual(pick(byMessage.get('shop-2')!), { type: 'identify', userId: 'u2' });
      assert.deepEqual(pick(byMessage.get('shop-3')!), { type: 'page', anonymousId: 'anon-1' });
      // U+0000 is stored as U+FFFD (PostgreSQL text cannot hold it); the filter below still names the id as sent.
      assert.deepEqual(pick(byMessage.get('app-2')!), { type: 'track', event: 'Odd', userId: AWKWARD_USER.replace('\u0000', '\uFFFD') });
    });

    it('finds the deliveries of a user across sources, newest first, and pages through them', async () => {
      const found = await list('userId=u1');
      assert.deepEqual(
        found.map((d) => [d.messageId, d.sourceId]),
        [
          ['app-1', app.id],
          ['shop-1', shop.id],
        ],
      );
      assert.deepEqual(pick(found[0]!), { type: 'track', event: 'Signed In', userId: 'u1' });
      const first = await list('userId=u1&limit=1');
      assert.deepEqual(first.map((d) => d.messageId), ['app-1']);
      assert.deepEqual((await list(`userId=u1&limit=1&beforeId=${first[0]!.id}`)).map((d) => d.messageId), ['shop-1']);
      assert.deepEqual(await list(`userId=u1&limit=1&beforeId=${found[1]!.id}`), []);
    });

    it('combines with the source, the status and each other', async () => {
      assert.deepEqual((await list(`userId=u1&sourceId=${shop.id}`)).map((d) => d.messageId), ['shop-1']);
      assert.deepEqual((await list(`userId=u1&status=succeeded`)).length, 2);
      assert.deepEqual(await list('userId=u1&status=failed'), []);
      assert.deepEqual((await list('userId=u1&messageId=app-1')).map((d) => d.messageId), ['app-1']);
      assert.deepEqual(await list('userId=u2&messageId=app-1'), [], 'both must match');
      assert.deepEqual(await list(`messageId=app-1&sourceId=${shop.id}`), []);
    });

    it('finds a delivery by messageId, an anonymous one too', async () => {
      const [page] = await list('messageId=shop-3');
      assert.equal(page!.sourceId, shop.id);
      assert.deepEqual(pick(page!), { type: 'page', anonymousId: 'anon-1' });
      assert.deepEqual(await list('messageId=nobody-sent-this'), []);
      assert.deepEqual(await list('userId=anon-1'), [], 'userId matches the userId only');
    });

    it('matches a user id exactly, whatever it holds', async () => {
      const found = await list(`userId=${encodeURIComponent(AWKWARD_USER)}`);
      assert.deepEqual(found.map((d) => d.messageId), ['app-2']);
      assert.deepEqual(await list(`userId=${encodeURIComponent('ü ser/1&x=')}`), [], 'no prefix match');
      assert.deepEqual(await list('userId=U1'), [], 'case matters');
    });

    it('answers 400 naming the field for an empty id or one over 1,024 bytes of UTF-8, as ingest bounds ids', async () => {
      // 342 CJK characters are 1,026 bytes: a bound in characters let them through.
      const cjk = (n: number): string => encodeURIComponent('\u4e00'.repeat(n));
      for (const [query, field] of [
        ['userId=', 'userId'],
        ['messageId=', 'messageId'],
        [`userId=${'u'.repeat(1_025)}`, 'userId'],
        [`messageId=${'m'.repeat(1_025)}`, 'messageId'],
        [`userId=${cjk(342)}`, 'userId'],
        [`messageId=${cjk(342)}`, 'messageId'],
      ] as const) {
        const answer = await sy.admin('GET', `/deliveries?${query}`);
        assert.equal(answer.status, 400, `${query.slice(0, 40)}: ${JSON.stringify(answer.body).slice(0, 200)}`);
        assert.equal(answer.body.error.code, 'invalid_request');
        assert.equal(answer.body.error.message, `${field} must be a non-empty string of at most 1024 bytes (UTF-8)`);
      }
      assert.deepEqual(await list(`userId=${'u'.repeat(1_024)}`), [], 'the longest id a message can carry is a valid filter');
      assert.deepEqual(await list(`messageId=${cjk(341)}`), [], '1,023 bytes are within the bound');
    });

    it('shows the message as stored with one delivery, and in the debugger by its seq', async () => {
      const [listed] = await list('messageId=shop-1');
      const detail = await sy.admin('GET', `/deliveries/${listed!.id}`);
      assert.equal(detail.status, 200);
      assert.equal(detail.body.event, 'Order Completed');
      assert.equal(detail.body.message.messageId, 'shop-1');
      assert.deepEqual(detail.body.message.properties, { total: 42 });
      assert.equal(detail.body.message.type, 'track');

      const entry = await sy.admin('GET', `/sources/${shop.id}/debugger/messages/${listed!.messageSeq}`);
      assert.equal(entry.status, 200, JSON.stringify(entry.body));
      assert.equal(entry.body.seq, listed!.messageSeq);
      assert.equal(entry.body.status, 'accepted');
      assert.deepEqual(entry.body.message, detail.body.message);

      const elsewhere = await sy.admin('GET', `/sources/${app.id}/debugger/messages/${listed!.messageSeq}`);
      assert.equal(elsewhere.status, 404, "another source's message is not found under this one");
      assert.equal((await sy.admin('GET', `/sources/${shop.id}/debugger/messages/abc`)).status, 400);
      assert.equal((await sy.admin('GET', `/sources/${shop.id}/debugger/messages/999999999`)).status, 404);
      assert.equal((await sy.admin('GET', `/sources/src_nope/debugger/messages/${listed!.messageSeq}`)).status, 404);
    });
  });
}

function pick(delivery: Listed): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const key of ['type', 'event', 'userId', 'anonymousId'] as const) if (delivery[key] !== undefined) fields[key] = delivery[key];
  return fields;
}

searchSuite('sqlite', () => ({}));

await describePostgres('deliveries by user and messageId on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  searchSuite('postgres', () => ({ 'database-url': db.url }));
});
