import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, sourceWithWebhooks, waitForOnlyDelivery } from '../helpers/webhooks.js';

describe('the multi-receiver rule', () => {
  let sy: TestSwitchyard;
  const receivers: TestReceiver[] = [];
  const receiver = async (reply: TestReceiver['reply']): Promise<TestReceiver> => {
    const started = await startReceiver();
    started.reply = reply;
    receivers.push(started);
    return started;
  };

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
  });
  after(async () => {
    await sy?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  it('posts to every receiver; one 200 and one 500 make it succeeded, with no retry', async () => {
    const ok = await receiver(() => ({ status: 200 }));
    const broken = await receiver(() => ({ status: 500 }));
    const source = await sourceWithWebhooks(sy, [ok.url, broken.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'succeeded');
    assert.equal(delivery.attempts.length, 2);
    const byUrl = new Map(delivery.attempts.map((a: any) => [a.url, a.statusCode]));
    assert.equal(byUrl.get(ok.url), 200);
    assert.equal(byUrl.get(broken.url), 500);
    assert.equal(ok.requests.length, 1);
    assert.equal(broken.requests.length, 1);
    assert.equal(ok.requests[0]!.body, broken.requests[0]!.body, 'the same body to both');
  });

  it('with a 500 and a 404, retries only the receiver that failed retriably', async () => {
    const flaky = await receiver((_request, index) => ({ status: index === 0 ? 500 : 200 }));
    const missing = await receiver(() => ({ status: 404 }));
    const source = await sourceWithWebhooks(sy, [flaky.url, missing.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'succeeded');
    assert.deepEqual(
      delivery.attempts.map((a: any) => [a.url, a.statusCode]),
      [[flaky.url, 500], [missing.url, 404], [flaky.url, 200]],
    );
    assert.equal(missing.requests.length, 1, 'the 404 receiver was not retried');
    assert.equal(flaky.requests.length, 2);
  });

  it('fails at once when every receiver refuses for good', async () => {
    const gone = await receiver(() => ({ status: 410 }));
    const bad = await receiver(() => ({ status: 400 }));
    const source = await sourceWithWebhooks(sy, [gone.url, bad.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'failed');
    assert.equal(delivery.attempts.length, 2);
    assert.match(delivery.lastError, /HTTP 410/);
    assert.match(delivery.lastError, /HTTP 400/);
  });

  it('fails a delivery whose destination was disabled before it was sent', async () => {
    const target = await receiver(() => ({ status: 200, hang: true }));
    const source = await sourceWithWebhooks(sy, [target.url]);
    // Disabling routes nothing new, so make a job first and disable while it is in flight.
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'first' });
    await target.waitFor(1);
    const disabled = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: false, settings: { webhooks: [{ url: target.url }] } });
    assert.equal(disabled.status, 200);
    target.release(500); // the in-flight POST fails retriably; its retry finds the destination disabled
    const delivery = await waitForOnlyDelivery(sy, source.id, 'failed');
    assert.match(delivery.lastError, /disabled/);
    assert.equal(target.requests.length, 1);
  });
});
