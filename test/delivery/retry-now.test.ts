import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type Reply, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** Retry now on a pending delivery, on whichever store `flags` choose. */
function retryNowSuite(name: string, flags: () => Record<string, string>): void {
  describe(`retry now: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    it('makes a pending delivery waiting for its next attempt due at once, instead of 409', async () => {
      // The first answer asks for ten minutes: without retry now, nothing would come within the test.
      receiver.reply = (_request, index): Reply => (index === 0 ? { status: 503, headers: { 'retry-after': '600' } } : { status: 200 });
      const source = await sy.createSource('retry-now');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Later' })).status, 200);
      const id = await eventually(async () => {
        const list = await sy.admin('GET', `/deliveries?sourceId=${source.id}`);
        const delivery = list.body.deliveries[0] as { id: number } | undefined;
        if (delivery === undefined) return undefined;
        const detail = await sy.admin('GET', `/deliveries/${delivery.id}`);
        return detail.body.status === 'pending' && detail.body.attempts.length === 1 ? delivery.id : undefined;
      }, 20_000, 'the first attempt to be recorded');

      const retried = await sy.admin('POST', `/deliveries/${id}/retry`);
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      assert.deepEqual(retried.body, { requeued: 1 });
      await eventually(async () => ((await sy.admin('GET', `/deliveries/${id}`)).body.status === 'succeeded' ? true : undefined), 20_000, 'the delivery to succeed');
      assert.equal(receiver.requests.length, 2);
    });
  });
}

retryNowSuite('sqlite', () => ({}));

await describePostgres('retry now on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  retryNowSuite('postgres', () => ({ 'database-url': db.url }));
});
