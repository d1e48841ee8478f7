import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Analytics } from '@segment/analytics-node';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, segmentSignatureMatches, sourceWithWebhooks } from '../helpers/webhooks.js';

const SECRET = 'sdk-secret';

describe('@segment/analytics-node → Switchyard → receiver', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('delivers every call type the SDK sends, shaped as Segment does, signed', async () => {
    const source = await sourceWithWebhooks(sy, [receiver.url], { sharedSecret: SECRET, headers: { 'X-Tenant': 't1' } });
    const analytics = new Analytics({ writeKey: source.writeKey, host: sy.url, flushAt: 1 });
    analytics.identify({ userId: 'u1', traits: { email: 'u1@example.com' } });
    analytics.track({ userId: 'u1', event: 'Order Completed', properties: { total: 9.99 } });
    analytics.page({ userId: 'u1', name: 'Pricing', properties: { path: '/pricing', url: 'https://example.com/pricing' } });
    analytics.screen({ userId: 'u1', name: 'Home' });
    analytics.group({ userId: 'u1', groupId: 'org-1', traits: { name: 'Org' } });
    analytics.alias({ userId: 'u1', previousId: 'anon-1' });
    await analytics.closeAndFlush({ timeout: 10_000 });

    const requests = await receiver.waitFor(6);
    const byType = new Map(requests.map((r) => [JSON.parse(r.body).type as string, r]));
    assert.deepEqual([...byType.keys()].sort(), ['alias', 'group', 'identify', 'page', 'screen', 'track']);
    for (const [type, request] of byType) {
      assert.ok(segmentSignatureMatches(request, SECRET), `${type} signature`);
      assert.equal(request.headers['content-type'], 'application/json');
      assert.match(request.headers['user-agent'] ?? '', /^Switchyard\//);
      assert.equal(request.headers['x-tenant'], 't1');
      const payload = JSON.parse(request.body);
      assert.equal(payload.version, 1);
      assert.equal(payload.userId, 'u1');
      assert.equal(typeof payload.messageId, 'string');
      assert.equal(typeof payload.timestamp, 'string');
      assert.equal(typeof payload.receivedAt, 'string');
      assert.equal(payload.context.library.name, '@segment/analytics-node');
    }
    const payload = (type: string): any => JSON.parse(byType.get(type)!.body);
    assert.equal(payload('identify').traits.email, 'u1@example.com');
    assert.equal(payload('track').event, 'Order Completed');
    assert.equal(payload('track').properties.total, 9.99);
    assert.equal(payload('page').properties.path, '/pricing');
    assert.equal(payload('screen').name, 'Home');
    assert.equal(payload('group').groupId, 'org-1');
    assert.equal(payload('alias')['Previous ID'], 'anon-1');
    assert.equal(payload('alias')['User ID'], 'u1');
  });
});
