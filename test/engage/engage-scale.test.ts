import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IDENTIFIER_LIMITS } from '../../src/domain/engage/index.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type ReceivedRequest, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Sync {
  userId?: string;
  traits: Record<string, unknown>;
  context: { personas: { computation_key: string } };
}

const syncsOf = (receiver: TestReceiver, key: string): Sync[] =>
  receiver.requests
    .map((r: ReceivedRequest) => JSON.parse(r.body) as Sync & { type: string })
    .filter((m) => m.type === 'identify' && m.context?.personas?.computation_key === key);

/** Issue 29: one heavy user or one huge profile must not cost the others. */
function scaleSuite(name: string, flags: () => Record<string, string>): void {
  describe(`Engage at scale: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };

    const batch = async (messages: Array<Record<string, unknown>>): Promise<void> => {
      for (let i = 0; i < messages.length; i += 250) {
        const response = await sy.send('/v1/batch', source.writeKey, { batch: messages.slice(i, i + 250) });
        assert.equal(response.status, 200, JSON.stringify(response.body));
      }
    };

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
      source = await sy.createSource('scale');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    it("evaluates a heavy user's backlog once per page: a sync per page, not per message, and the last value", { timeout: 90_000 }, async () => {
      const created = await sy.admin('POST', '/computed-traits', {
        name: 'Last Sku',
        definition: { type: 'last', event: 'Product Viewed', property: 'sku' },
        destinations: [source.id],
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      await eventually(async () => ((await sy.admin('GET', `/computed-traits/${created.body.id}`)).body.status === 'live' ? true : undefined), 15_000, 'live');
      const heavy = 1_000;
      const start = Date.parse('2026-01-01T00:00:00Z');
      // Every message changes the heavy user's value; the bystander comes last.
      const messages = Array.from({ length: heavy }, (_, i) => ({
        type: 'track',
        userId: 'heavy',
        event: 'Product Viewed',
        properties: { sku: `sku-${i}` },
        timestamp: new Date(start + i).toISOString(),
      }));
      await batch(messages);
      await batch([{ type: 'track', userId: 'bystander', event: 'Product Viewed', properties: { sku: 'mine' }, timestamp: new Date(start).toISOString() }]);
      await eventually(() => syncsOf(receiver, 'last_sku').find((s) => s.userId === 'bystander'), 60_000, "the bystander's sync");
      const last = await eventually(
        () => syncsOf(receiver, 'last_sku').find((s) => s.userId === 'heavy' && s.traits['last_sku'] === `sku-${heavy - 1}`),
        30_000,
        "the heavy user's last value",
      );
      assert.ok(last);
      const heavySyncs = syncsOf(receiver, 'last_sku').filter((s) => s.userId === 'heavy');
      // Engage reads at most 500 messages a page: one evaluation, one sync per page (before: one per message).
      assert.ok(heavySyncs.length <= Math.ceil(heavy / 500) + 2, `${heavySyncs.length} syncs for ${heavy} messages`);
      const profile = await sy.admin('GET', '/profiles/user_id:heavy');
      assert.equal(profile.body.computedTraits['last_sku'], `sku-${heavy - 1}`);
    });

    it('bounds the identifiers of one profile, pages them, and answers /healthz while it is read', { timeout: 120_000 }, async () => {
      const limit = IDENTIFIER_LIMITS.anonymous_id;
      const extra = 5;
      const at = Date.parse('2026-02-01T00:00:00Z');
      const links = Array.from({ length: limit + extra }, (_, i) => ({
        type: 'identify',
        userId: 'crawler',
        anonymousId: `anon-${String(i).padStart(5, '0')}`,
        traits: { n: i },
        timestamp: new Date(at + i).toISOString(),
      }));
      await batch(links);
      const last = `anonymous_id:anon-${String(limit + extra - 1).padStart(5, '0')}`;
      // The last message is applied (its trait) although its anonymous id is beyond the limit and not linked.
      await eventually(async () => {
        const profile = await sy.admin('GET', '/profiles/user_id:crawler');
        return profile.status === 200 && profile.body.traits.n === limit + extra - 1 ? true : undefined;
      }, 60_000, 'every link applied');
      assert.equal((await sy.admin('GET', `/profiles/${encodeURIComponent(last)}`)).status, 404, 'beyond the limit: not linked');

      // Paged: every identifier once, in order, with a cursor while more.
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const query = `identifiersLimit=300${cursor === undefined ? '' : `&identifiersCursor=${encodeURIComponent(cursor)}`}`;
        const page = await sy.admin('GET', `/profiles/user_id:crawler?${query}`);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        assert.ok(page.body.identifiers.length <= 300);
        seen.push(...(page.body.identifiers as string[]));
        cursor = page.body.identifiersCursor as string | undefined;
        pages++;
      } while (cursor !== undefined && pages < 10);
      assert.equal(seen.length, limit + 1);
      assert.equal(new Set(seen).size, seen.length);
      assert.deepEqual(seen, [...seen].sort());
      assert.ok(seen.includes('user_id:crawler'));
      assert.equal(seen.filter((i) => i.startsWith('anonymous_id:')).length, limit);
      assert.ok(pages >= 4);

      // Reads of the largest allowed profile and /healthz side by side: all answer.
      const reads = Array.from({ length: 5 }, () => sy.admin('GET', '/profiles/user_id:crawler'));
      const health = await fetch(`${sy.url}/healthz`);
      assert.equal(health.status, 200);
      for (const read of await Promise.all(reads)) assert.equal(read.status, 200);
    });
  });
}

scaleSuite('sqlite', () => ({}));

await describePostgres('Engage at scale on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  scaleSuite('postgres', () => ({ 'database-url': db.url }));
});
