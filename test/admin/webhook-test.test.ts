import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';
import { sourceWithWebhooks } from '../helpers/webhooks.js';

describe('POST /admin/v1/sources/:id/destinations/webhooks/test', () => {
  let sy: TestSwitchyard;
  let strict: TestSwitchyard;
  let good: TestReceiver;
  let chatty: TestReceiver;

  before(async () => {
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    strict = await startTestSwitchyard();
    good = await startReceiver();
    chatty = await startReceiver();
  });
  after(async () => {
    await good.close();
    await chatty.close();
    await sy.close();
    await strict.close();
  });

  it("sends a signed test track to every receiver and answers with each receiver's response", async () => {
    const source = await sourceWithWebhooks(sy, [good.url, chatty.url], { sharedSecret: 'k', headers: { 'X-Env': 'test' } });
    good.reply = () => ({ status: 204, body: '' });
    chatty.reply = () => ({ status: 500, body: 'x'.repeat(5_000) });
    const answer = await sy.admin('POST', `/sources/${source.id}/destinations/webhooks/test`);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const [first, second] = answer.body.answers;
    assert.equal(first.url, good.url);
    assert.equal(first.statusCode, 204);
    assert.equal(second.statusCode, 500);
    assert.equal(second.body.length, 2_048, 'the body is cut at 2 KB');
    assert.equal(second.bodyTruncated, true);

    const [received] = await good.waitFor(1);
    const body = JSON.parse(received!.body);
    assert.equal(body.type, 'track');
    assert.equal(body.event, 'Switchyard Test Message');
    assert.equal(body.version, 1);
    assert.equal(received!.headers['x-env'], 'test');
    assert.equal(received!.headers['x-signature'], createHmac('sha1', 'k').update(received!.body).digest('hex'));
    // Nothing is stored: no message, no delivery.
    assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/debugger`)).body.messages, []);
    assert.deepEqual((await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries, []);
  });

  it('reports a receiver that does not answer as an error', async () => {
    const closed = await startReceiver();
    const url = closed.url;
    await closed.close();
    const source = await sourceWithWebhooks(sy, [url]);
    const answer = await sy.admin('POST', `/sources/${source.id}/destinations/webhooks/test`);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.answers[0].statusCode, undefined);
    assert.match(answer.body.answers[0].error, /ECONNREFUSED/);
  });

  it('answers 404 for a source without a Webhooks destination', async () => {
    const source = await sy.createSource('bare');
    const answer = await sy.admin('POST', `/sources/${source.id}/destinations/webhooks/test`);
    assert.equal(answer.status, 404);
    assert.equal(answer.body.error.code, 'not_found');
    assert.equal((await sy.admin('POST', '/sources/src_nope/destinations/webhooks/test')).status, 404);
  });

  it('does not reach a private address unless private receivers are allowed', async () => {
    // Stored directly: the admin API would refuse this receiver on the strict server.
    const source = await strict.createSource('private');
    await strict.store.putDestination({ sourceId: source.id, kind: 'webhooks', enabled: true, settings: { webhooks: [{ url: good.url }] }, updatedAt: Date.now() });
    const before = good.requests.length;
    const answer = await strict.admin('POST', `/sources/${source.id}/destinations/webhooks/test`);
    assert.equal(answer.status, 200);
    assert.match(answer.body.answers[0].error, /private|loopback/i);
    assert.equal(good.requests.length, before);
  });
});
