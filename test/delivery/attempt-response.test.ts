import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type Reply, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Attempt {
  statusCode?: number;
  response?: { contentType?: string; retryAfter?: string; body: string; bodyTruncated?: boolean };
}

/** The attempt log keeps the receiver's answer, on whichever store `flags` choose. */
function attemptResponseSuite(name: string, flags: () => Record<string, string>): void {
  describe(`the attempt log keeps the receiver's answer: ${name}`, () => {
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

    it('status, content-type, retry-after and the first 1 KB of the body, per attempt', async () => {
      const long = `${'é'.repeat(100)}${'x'.repeat(4_000)}`;
      receiver.reply = (_request, index): Reply =>
        index === 0
          ? { status: 503, headers: { 'content-type': 'application/json', 'retry-after': '1' }, body: '{"error":"busy"}' }
          : { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: long };
      const source = await sy.createSource('answers');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Answered' })).status, 200);

      const delivery = await eventually(async () => {
        const list = await sy.admin('GET', `/deliveries?sourceId=${source.id}&status=succeeded`);
        return list.body.deliveries[0] as { id: number } | undefined;
      }, 20_000, 'the delivery to succeed on its second attempt');
      const detail = await sy.admin('GET', `/deliveries/${delivery.id}`);
      assert.equal(detail.status, 200);
      const [first, second] = detail.body.attempts as Attempt[];
      assert.equal(first!.statusCode, 503);
      assert.deepEqual(first!.response, { contentType: 'application/json', retryAfter: '1', body: '{"error":"busy"}' });
      assert.equal(second!.statusCode, 200);
      assert.equal(second!.response!.contentType, 'text/plain; charset=utf-8');
      assert.equal(second!.response!.bodyTruncated, true);
      assert.equal(Buffer.byteLength(second!.response!.body), 1024, 'the first 1 KB, no more');
      assert.ok(long.startsWith(second!.response!.body), 'the start of the body, as UTF-8');
    });
  });
}

attemptResponseSuite('sqlite', () => ({}));

await describePostgres('the attempt log on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  attemptResponseSuite('postgres', () => ({ 'database-url': db.url }));
});
