import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Analytics as SegmentAnalytics } from '@segment/analytics-node';
import RudderAnalytics from '@rudderstack/rudder-sdk-node';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** Real client libraries, unchanged but for the host they are pointed at. */
describe('real clients', () => {
  let sy: TestSwitchyard;

  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy.close();
  });

  const accepted = async (sourceId: string, count: number) =>
    eventually(async () => {
      const messages = (await sy.store.listRecentMessages(sourceId, 100)).filter((m) => m.status === 'accepted');
      return messages.length >= count ? messages.map((m) => JSON.parse(m.body)) : undefined;
    }, 10_000, `${count} accepted messages`);

  it('@segment/analytics-node sends every call type', async () => {
    const source = await sy.createSource('segment-node');
    const errors: unknown[] = [];
    const analytics = new SegmentAnalytics({ writeKey: source.writeKey, host: sy.url, flushAt: 1, maxRetries: 0 });
    analytics.on('error', (error) => errors.push(error));
    analytics.identify({ userId: 'u1', traits: { plan: 'pro' } });
    analytics.track({ userId: 'u1', event: 'Order Completed', properties: { total: 42 } });
    analytics.page({ userId: 'u1', name: 'Home', properties: { path: '/' } });
    analytics.screen({ userId: 'u1', name: 'Main' });
    analytics.group({ userId: 'u1', groupId: 'g1', traits: { name: 'Acme' } });
    analytics.alias({ userId: 'u1', previousId: 'anon-1' });
    await analytics.closeAndFlush({ timeout: 10_000 });
    assert.deepEqual(errors, []);

    const messages = await accepted(source.id, 6);
    assert.deepEqual(messages.map((m) => m.type).sort(), ['alias', 'group', 'identify', 'page', 'screen', 'track']);
    const track = messages.find((m) => m.type === 'track');
    assert.equal(track.event, 'Order Completed');
    assert.equal(track.context.library.name, '@segment/analytics-node');
    assert.ok(track.sentAt && track.receivedAt && track.originalTimestamp && track.timestamp);
  });

  it("RudderStack's Node SDK (gzip, Basic auth, form-urlencoded) is accepted", async () => {
    const source = await sy.createSource('rudder-node');
    const analytics = new RudderAnalytics(source.writeKey, { dataPlaneUrl: sy.url, flushAt: 1, flushInterval: 50, logLevel: 'error' });
    analytics.identify({ userId: 'r1', traits: { a: 1 } });
    analytics.track({ userId: 'r1', event: 'Rudder Event', properties: { b: 2 } });
    await new Promise<void>((resolve, reject) => analytics.flush((error?: Error) => (error ? reject(error) : resolve())));
    const messages = await accepted(source.id, 2);
    assert.deepEqual(messages.map((m) => m.type).sort(), ['identify', 'track']);
  });

  it('takes the exact request shapes analytics.js sends', async () => {
    const source = await sy.createSource('analytics.js');
    const origin = 'https://shop.example';
    const event = (type: string, extra: object) => ({
      type,
      anonymousId: 'anon-b',
      messageId: `ajs-next-${type}-${Math.random()}`,
      timestamp: new Date().toISOString(),
      context: { library: { name: 'analytics.js', version: 'next-1.70.0' }, page: { path: '/cart', url: `${origin}/cart` }, userAgent: 'Mozilla/5.0' },
      integrations: {},
      writeKey: source.writeKey,
      sentAt: new Date().toISOString(),
      ...extra,
    });

    // A preflight, as sent when a site configures Basic auth headers.
    const preflight = await fetch(`${sy.url}/v1/t`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    assert.equal(preflight.status, 204);

    // Standard dispatcher: one call per request, text/plain to avoid a preflight.
    const single = await fetch(`${sy.url}/v1/t`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', origin },
      body: JSON.stringify(event('track', { event: 'Added to Cart', properties: { sku: 'a' } })),
    });
    assert.equal(single.status, 200);
    assert.equal(single.headers.get('access-control-allow-origin'), origin);

    // Batching dispatcher: /b with the write key in each event.
    const batch = await fetch(`${sy.url}/v1/b`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', origin },
      body: JSON.stringify({ batch: [event('page', { name: 'Cart' }), event('identify', { traits: { email: 'a@b.c' } })], sentAt: new Date().toISOString() }),
    });
    assert.equal(batch.status, 200);

    const messages = await accepted(source.id, 3);
    for (const message of messages) {
      assert.equal(message.writeKey, undefined);
      assert.equal(message.context.ip, '127.0.0.1', 'browser calls get the request IP');
    }
  });
});
