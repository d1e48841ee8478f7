import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const ORDER = { type: 'object', properties: { revenue: { type: 'number' }, currency: { type: 'string', enum: ['EUR', 'USD'] } }, required: ['revenue'] };

type Counts = {
  since: string;
  plan: { id: string; version: number } | null;
  violations: { event: string | null; callType: string; type: string; count: number; latest: { messageId: string; receivedAt: string; violation: any } }[];
  truncated: boolean;
};

/** Violation counts end to end, on whichever store `flags` choose. */
function violationSuite(name: string, flags: () => Record<string, string>): void {
  describe(`tracking-plan violation counts: ${name}`, () => {
    let sy: TestSwitchyard;
    before(async () => {
      sy = await startTestSwitchyard(flags());
    });
    after(async () => {
      await sy?.close();
    });

    const countsOf = async (id: string, query = ''): Promise<Counts> => {
      const answer = await sy.admin('GET', `/sources/${id}/tracking-plan/violations${query}`);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer.body as Counts;
    };
    const summary = (counts: Counts) => counts.violations.map((v) => `${v.callType}/${v.event ?? '-'}/${v.type}=${v.count}`).sort();

    it('counts per event and type, with the latest example of each; blocked messages count too, duplicates do not', async () => {
      const source = await sy.createSource('counted');
      const plan = { events: { 'Order Completed': { properties: ORDER } }, identify: { traits: { type: 'object', properties: { email: { type: 'string' } } } }, controls: { unplannedEvents: 'flag', violations: 'flag' } };
      const put = await sy.admin('POST', `/sources/${source.id}/tracking-plan`, plan);
      assert.equal(put.status, 201);
      assert.deepEqual((await countsOf(source.id)).violations, [], 'nothing yet');

      await sy.send('/v1/batch', source.writeKey, {
        batch: [
          { type: 'track', userId: 'u', messageId: 'm1', event: 'Order Completed', properties: { revenue: 'ten' } },
          { type: 'track', userId: 'u', messageId: 'm2', event: 'Order Completed', properties: { revenue: 'eleven', currency: 'GBP' } },
          { type: 'track', userId: 'u', messageId: 'm3', event: 'Order Completed', properties: {} },
          { type: 'track', userId: 'u', messageId: 'm4', event: 'Unknown Thing' },
          { type: 'identify', userId: 'u', messageId: 'm5', traits: { email: 42 } },
          { type: 'track', userId: 'u', messageId: 'm6', event: 'Order Completed', properties: { revenue: 5 } },
        ],
      });
      await sy.send('/v1/track', source.writeKey, { userId: 'u', messageId: 'm7', event: 'Order Completed', properties: { revenue: [1] } });
      // A duplicate of m7: stored as duplicate, not counted again.
      await sy.send('/v1/track', source.writeKey, { userId: 'u', messageId: 'm7', event: 'Order Completed', properties: { revenue: [1] } });

      let counts = await countsOf(source.id);
      assert.deepEqual(counts.plan, { id: put.body.id, version: 1 });
      assert.deepEqual(summary(counts), [
        'identify/-/Datatype-Mismatch=1',
        'track/Order Completed/Advance-Rules-Violation=1',
        'track/Order Completed/Datatype-Mismatch=3',
        'track/Order Completed/Required-Missing=1',
        'track/Unknown Thing/Unplanned-Event=1',
      ]);
      const mismatch = counts.violations.find((v) => v.event === 'Order Completed' && v.type === 'Datatype-Mismatch')!;
      assert.equal(mismatch.latest.messageId, 'm7', 'the latest example');
      assert.equal(mismatch.latest.violation.property, 'revenue');
      assert.equal(mismatch.latest.violation.meta.instancePath, '/properties/revenue');
      assert.ok(Date.parse(mismatch.latest.receivedAt) <= Date.now());
      assert.equal(counts.violations[0]!.type, 'Datatype-Mismatch', 'biggest count first');

      // A block plan: blocked messages are counted.
      await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, { ...plan, controls: { violations: 'block' } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u', messageId: 'm8', event: 'Order Completed', properties: {} });
      const [blocked] = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages as { status: string }[];
      assert.equal(blocked!.status, 'blocked');
      counts = await countsOf(source.id);
      const missing = counts.violations.find((v) => v.type === 'Required-Missing')!;
      assert.equal(missing.count, 2);
      assert.equal(missing.latest.messageId, 'm8');
      assert.equal(counts.plan!.version, 2);
    });

    it('counts from ?since= (by hour), and refuses a bad since', async () => {
      const source = await sy.createSource('since');
      await sy.admin('POST', `/sources/${source.id}/tracking-plan`, { events: {}, controls: { unplannedEvents: 'flag' } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Anything' });
      assert.equal((await countsOf(source.id)).violations.length, 1);
      assert.equal((await countsOf(source.id, `?since=${new Date(Date.now() - 3_600_000).toISOString()}`)).violations.length, 1);
      const later = await countsOf(source.id, `?since=${new Date(Date.now() + 2 * 3_600_000).toISOString()}`);
      assert.deepEqual(later.violations, []);
      assert.equal(Date.parse(later.since) % 3_600_000, 0, 'since is the start of an hour');
      assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan/violations?since=soon`)).status, 400);
      assert.equal((await sy.admin('GET', '/sources/src_nope/tracking-plan/violations')).status, 404);
    });
  });
}

violationSuite('sqlite', () => ({}));

await describePostgres('tracking-plan violation counts on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  violationSuite('postgres', () => ({ 'database-url': db.url }));
});
