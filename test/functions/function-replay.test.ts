import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type FreshDatabase, describePostgres, freshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const ECHO = `
async function onTrack(event, settings) {
  const res = await fetch(settings.url, { method: 'POST', body: JSON.stringify({ messageId: event.messageId }) });
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

function replaySuite(name: string, flags: () => Record<string, string>): void {
  describe(`replays to a function destination (${name})`, () => {
    let sy: TestSwitchyard;
    let webhookReceiver: TestReceiver;
    let functionReceiver: TestReceiver;

    before(async () => {
      webhookReceiver = await startReceiver();
      functionReceiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
    });
    after(async () => {
      await sy?.close();
      await webhookReceiver?.close();
      await functionReceiver?.close();
    });

    const countsById = (receiver: TestReceiver, prefix: string): Record<string, number> => {
      const counts: Record<string, number> = {};
      for (const request of receiver.requests) {
        const id = (JSON.parse(request.body) as { messageId: string }).messageId;
        if (id.startsWith(prefix)) counts[id] = (counts[id] ?? 0) + 1;
      }
      return counts;
    };
    const replay = async (sourceId: string, body: Record<string, unknown>) => {
      const created = await sy.admin('POST', `/sources/${sourceId}/replays`, body);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return eventually(async () => {
        const { body: got } = await sy.admin('GET', `/replays/${created.body.id}`);
        return got.status === 'done' && got.delivered === got.queued ? got : undefined;
      }, 20_000, 'the replay to finish');
    };
    const addFunction = async (sourceId: string, fnName: string) => {
      const created = await sy.admin('POST', `/sources/${sourceId}/destinations/functions`, { name: fnName, code: ECHO, settings: { url: functionReceiver.url } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return created.body.id as string;
    };

    it("re-delivers a range to a function named in receivers, beside or without the Webhooks destination's receivers", { timeout: 90_000 }, async () => {
      const source = await sy.createSource('replay-fn');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: webhookReceiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const fnId = await addFunction(source.id, 'Echo');
      const from = new Date(Date.now() - 1_000).toISOString();
      const batch = Array.from({ length: 5 }, (_, i) => ({ type: 'track', userId: `u${i % 2}`, event: 'E', messageId: `rf-${name}-${i}` }));
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
      const prefix = `rf-${name}-`;
      await eventually(() => (Object.keys(countsById(functionReceiver, prefix)).length === 5 && Object.keys(countsById(webhookReceiver, prefix)).length === 5 ? true : undefined), 15_000, 'live deliveries');
      await new Promise((resolve) => setTimeout(resolve, 5)); // `to` after every receivedAt
      const to = new Date(Date.now() + 1).toISOString();
      const once = Object.fromEntries(batch.map((m) => [m.messageId, 1]));
      const twice = Object.fromEntries(batch.map((m) => [m.messageId, 2]));
      const thrice = Object.fromEntries(batch.map((m) => [m.messageId, 3]));

      // The function alone.
      const onlyFunction = await replay(source.id, { from, to, receivers: [fnId] });
      assert.deepEqual([onlyFunction.queued, onlyFunction.delivered, onlyFunction.failed], [5, 5, 0]);
      assert.deepEqual(countsById(functionReceiver, prefix), twice);
      assert.deepEqual(countsById(webhookReceiver, prefix), once, 'the Webhooks destination is not replayed to');

      // The webhook receiver and the function.
      const both = await replay(source.id, { from, to, receivers: [webhookReceiver.url, fnId] });
      assert.deepEqual([both.queued, both.delivered, both.failed], [10, 10, 0]);
      assert.deepEqual(countsById(functionReceiver, prefix), thrice);
      assert.deepEqual(countsById(webhookReceiver, prefix), twice);
      const listed = await sy.admin('GET', `/deliveries?sourceId=${source.id}&limit=100`);
      const replayedToFunction = (listed.body.deliveries as Array<{ functionId?: string; replayId?: string }>).filter((d) => d.functionId === fnId && d.replayId !== undefined);
      assert.equal(replayedToFunction.length, 10);

      // Without receivers: the Webhooks destination only, as before.
      await replay(source.id, { from, to });
      assert.deepEqual(countsById(functionReceiver, prefix), thrice);
      assert.deepEqual(countsById(webhookReceiver, prefix), thrice);
    });

    it('replays to a function on a source without a Webhooks destination, and refuses a function id that is not the source\'s', { timeout: 60_000 }, async () => {
      const source = await sy.createSource('replay-fn-only');
      const other = await sy.createSource('replay-fn-other');
      const fnId = await addFunction(source.id, 'Only');
      const otherFn = await addFunction(other.id, 'Other');
      const from = new Date(Date.now() - 1_000).toISOString();
      const prefix = `rfo-${name}-`;
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'E', messageId: `${prefix}1` })).status, 200);
      await eventually(() => (countsById(functionReceiver, prefix)[`${prefix}1`] === 1 ? true : undefined), 15_000, 'live delivery');
      await new Promise((resolve) => setTimeout(resolve, 5));
      const to = new Date(Date.now() + 1).toISOString();

      const foreign = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to, receivers: [otherFn] });
      assert.equal(foreign.status, 400);
      assert.equal(foreign.body.error.code, 'unknown_receiver');
      const noWebhooks = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to });
      assert.equal(noWebhooks.status, 404, 'without receivers a replay needs the Webhooks destination');

      const done = await replay(source.id, { from, to, receivers: [fnId] });
      assert.deepEqual([done.queued, done.delivered], [1, 1]);
      assert.deepEqual(countsById(functionReceiver, prefix), { [`${prefix}1`]: 2 });
    });
  });
}

replaySuite('sqlite', () => ({}));

await describePostgres('replays to a function destination on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  replaySuite('postgres', () => ({ 'database-url': db.url }));
});
