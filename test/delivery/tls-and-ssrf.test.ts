import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver, startSelfSignedReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, sourceWithWebhooks, waitForOnlyDelivery } from '../helpers/webhooks.js';

describe('TLS verification', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;

  before(async () => {
    receiver = await startSelfSignedReceiver();
    sy = await startTestSwitchyard(FAST_RETRIES);
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('refuses a self-signed certificate: an error, not retried, and no request sent', async () => {
    const source = await sourceWithWebhooks(sy, [receiver.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'failed');
    assert.equal(delivery.attempts.length, 1);
    assert.match(delivery.attempts[0].error, /TLS certificate not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\)/);
    assert.equal(receiver.requests.length, 0);
  });
});

describe('the private-address guard when sending', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;

  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'allow-private-receivers': 'false' });
    receiver = await startReceiver();
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  // Settings saved while private receivers were allowed (the admin API would refuse them now).
  for (const host of ['127.0.0.1', 'localhost', '0x7f.0.0.1', '[::ffff:127.0.0.1]']) {
    it(`refuses to send to ${host}, a private address, without connecting`, async () => {
      const source = await sy.createSource('ssrf');
      const url = `http://${host}:${receiver.port}/hook`;
      await sy.store.putDestination({ sourceId: source.id, kind: 'webhooks', enabled: true, settings: { webhooks: [{ url, headers: {} }] }, updatedAt: Date.now() });
      // The directory reloads on the store's change event; wait until routing sees the destination.
      await eventually(async () => {
        await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
        return (await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries.length > 0 ? true : undefined;
      }, 10_000, 'a delivery job');
      const delivery = await waitForOnlyDelivery(sy, source.id, 'failed');
      assert.equal(delivery.attempts.length, 1);
      assert.match(delivery.attempts[0].error, /private address refused/);
      assert.equal(receiver.requests.length, 0);
    });
  }
});
