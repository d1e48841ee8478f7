import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const PLAN = {
  name: 'Web',
  events: { 'Order Completed': { properties: { type: 'object', properties: { revenue: { type: 'number' } }, required: ['revenue'] } } },
  controls: { unplannedEvents: 'flag', violations: 'block' },
};

function previewSuite(store: string, flags: () => Record<string, string>): void {
  let sy: TestSwitchyard;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard(flags());
    source = await sy.createSource('plans');
    // A plan in force that flags every event, so its marks are in the stored messages.
    assert.equal((await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, { events: {}, controls: { unplannedEvents: 'flag' } })).status, 200);
    const batch = [
      { type: 'track', userId: 'u', event: 'Order Completed', properties: { revenue: 12 } },
      { type: 'track', userId: 'u', event: 'Order Completed', properties: { revenue: 'twelve' } },
      { type: 'track', userId: 'u', event: 'Page Pinged' },
      { type: 'identify', userId: 'u', traits: { plan: 'pro' } },
    ];
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
  });

  after(async () => {
    await sy?.close();
  });

  it(`${store}: answers what an unsaved plan would do with each of the latest messages, storing nothing`, async () => {
    const storedBefore = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=100`)).body.messages;
    assert.ok(storedBefore[1].message.context.violationErrors !== undefined, 'the plan in force marked the messages');

    const answer = await sy.admin('POST', `/sources/${source.id}/tracking-plan/preview`, { plan: PLAN, limit: 3 });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    // Newest first, three of four.
    assert.deepEqual(
      answer.body.messages.map((m: any) => [m.type, m.event, m.action, m.violations.map((v: any) => v.type)]),
      [
        ['identify', undefined, 'pass', []],
        ['track', 'Page Pinged', 'flag', ['Unplanned-Event']],
        ['track', 'Order Completed', 'block', ['Datatype-Mismatch']],
      ],
    );
    assert.equal(answer.body.flagged, 1);
    assert.equal(answer.body.blocked, 1);
    assert.equal(answer.body.messages[2].violations[0].property, 'revenue');
    assert.equal(answer.body.messages[2].message.properties.revenue, 'twelve', 'the message as stored comes with its verdict');

    // The plan in force, and the messages, are unchanged.
    assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).body.version, 1);
    assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/debugger?limit=100`)).body.messages, storedBefore);
  });

  it(`${store}: refuses an invalid plan with invalid_tracking_plan, a bad limit and an unknown source`, async () => {
    const invalid = await sy.admin('POST', `/sources/${source.id}/tracking-plan/preview`, { plan: { events: { Bad: { properties: { type: 'nonsense' } } } } });
    assert.equal(invalid.status, 400);
    assert.equal(invalid.body.error.code, 'invalid_tracking_plan');
    assert.match(invalid.body.error.message, /Bad/);
    const limit = await sy.admin('POST', `/sources/${source.id}/tracking-plan/preview`, { plan: PLAN, limit: 1000 });
    assert.equal(limit.status, 400);
    assert.equal((await sy.admin('POST', '/sources/src_nope/tracking-plan/preview', { plan: PLAN })).status, 404);
  });
}

describe('tracking plan preview on SQLite', () => {
  previewSuite('sqlite', () => ({}));
});

await describePostgres('tracking plan preview on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  previewSuite('postgres', () => ({ 'database-url': db.url }));
});
