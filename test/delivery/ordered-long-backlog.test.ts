import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OrderReceiver } from '../helpers/order-receiver.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES } from '../helpers/webhooks.js';

/**
 * One user with a backlog of 100,000 messages to an ordered destination
 * (a receiver that was down, or a bulk import): the key delivers one
 * message at a time, at the pace its receiver answers, and the other users
 * of the source, and other sources, are not held behind it. No timing is
 * asserted: the others' messages, stored after the whole backlog, must all
 * arrive while the heavy key moves only a few steps, whatever the
 * machine's speed.
 */
const HEAVY_MESSAGES = 100_000;
const BATCH = 500;
const OTHER_USERS = 40;
const PER_OTHER_USER = 5;
/** How far the heavy key may move while the others' messages, once stored, are all delivered. */
const HEAVY_STEPS_BOUND = 2_000;

function track(userId: string, i: number): Record<string, unknown> {
  return { type: 'track', event: 'E', userId, properties: { i } };
}

function suite(flags: () => Record<string, string>): void {
  let sy: TestSwitchyard;
  let ordered: OrderReceiver;
  let plain: OrderReceiver;
  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES, ...flags() });
    // The heavy user's receiver takes a little while per answer, as a real one does.
    ordered = await new OrderReceiver((_, message) => ({ status: 200, delayMs: message.key === 'heavy' ? 5 : 0 })).listen();
    plain = await new OrderReceiver(() => ({ status: 200, delayMs: 0 })).listen();
  });
  after(async () => {
    await sy?.close();
    await ordered?.close();
    await plain?.close();
  });

  it(`a user with ${HEAVY_MESSAGES.toLocaleString('en')} messages delivers one at a time, in order, and holds back no other user or source`, async () => {
    const source = await sy.createSource('heavy');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: ordered.url }], ordering: 'user' } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const other = await sy.createSource('bystander');
    assert.equal((await sy.admin('PUT', `/sources/${other.id}/destinations/webhooks`, { settings: { webhooks: [{ url: plain.url }] } })).status, 200);

    for (let start = 0; start < HEAVY_MESSAGES; start += BATCH) {
      const batch = [];
      for (let i = start; i < Math.min(HEAVY_MESSAGES, start + BATCH); i++) batch.push(track('heavy', i));
      const answer = await sy.send('/v1/batch', source.writeKey, { batch });
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
    }
    const heavyArrived = (): number => ordered.arrivals.filter((a) => a.key === 'heavy').length;
    assert.ok(heavyArrived() < HEAVY_MESSAGES, 'the backlog is still being worked off when the others arrive');

    // Stored after the whole backlog (processing goes by the order requests were stored in).
    const others = [];
    for (let u = 0; u < OTHER_USERS; u++) for (let k = 0; k < PER_OTHER_USER; k++) others.push(track(`user-${u}`, HEAVY_MESSAGES + u * PER_OTHER_USER + k));
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: others })).status, 200);
    assert.equal((await sy.send('/v1/batch', other.writeKey, { batch: others })).status, 200);
    const heavyAtStored = heavyArrived();

    const expected = OTHER_USERS * PER_OTHER_USER;
    await eventually(() => (ordered.arrivals.filter((a) => a.key !== 'heavy').length >= expected ? true : undefined), 120_000, 'the other users of the ordered source');
    await eventually(() => (plain.arrivals.length >= expected ? true : undefined), 120_000, 'the other source');
    const heavySteps = heavyArrived() - heavyAtStored;
    assert.ok(
      heavySteps < HEAVY_STEPS_BOUND,
      `the others waited while the heavy key moved ${heavySteps} steps (bound ${HEAVY_STEPS_BOUND}): they were held behind its backlog`,
    );
    assert.ok(heavyArrived() > 0, 'the heavy key is being delivered');
    assert.deepEqual(ordered.overlaps, [], 'never two requests of one key in flight at the receiver');
    assert.deepEqual(ordered.inversions(), [], 'each key in processing order');
  });
}

describe('ordered delivery with one very long backlog (SQLite)', { timeout: 600_000 }, () => {
  suite(() => ({}));
});

await describePostgres('ordered delivery with one very long backlog (PostgreSQL)', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  suite(() => ({ 'database-url': db.url }));
});
