import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, segmentSignatureMatches, sourceWithWebhooks } from '../helpers/webhooks.js';

const SECRET = 'shh-its-a-secret';

describe('webhook payloads and headers, end to end', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'user-agent': 'SwitchyardTest/1.0' });
    receiver = await startReceiver();
    source = await sourceWithWebhooks(sy, [receiver.url], { sharedSecret: SECRET, headers: { 'X-Key': 'static-value' } });
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  const context = { library: { name: 'test', version: '1' }, page: { path: '/p', referrer: 'https://ref.example/', title: 'Title', url: 'https://site.example/p' } };
  const calls: Array<[string, Record<string, unknown>]> = [
    ['identify', { userId: 'u1', traits: { plan: 'pro' }, anonymousId: 'anon-1' }],
    ['track', { userId: 'u1', event: 'Signed Up', properties: { plan: 'pro' } }],
    ['page', { userId: 'u1', name: 'Home', properties: { title: 'Own title' }, context }],
    ['screen', { userId: 'u1', name: 'Dashboard' }],
    ['group', { userId: 'u1', groupId: 'g1', traits: { name: 'Acme' } }],
    ['alias', { userId: 'u2', previousId: 'u1' }],
  ];

  it('POSTs each call type with the fields Segment sends, signed, with the static and standard headers', async () => {
    for (const [type, body] of calls) {
      const sent = await sy.send(`/v1/${type}`, source.writeKey, { ...body, messageId: `m-${type}`, timestamp: '2024-01-01T00:00:00.000Z', sentAt: '2024-01-01T00:00:01.000Z' });
      assert.equal(sent.status, 200);
    }
    const requests = await receiver.waitFor(calls.length);
    const byType = new Map(requests.map((r) => [JSON.parse(r.body).type as string, r]));
    assert.equal(byType.size, calls.length);

    for (const [type] of calls) {
      const request = byType.get(type)!;
      assert.equal(request.method, 'POST');
      assert.equal(request.path, '/hook');
      assert.equal(request.headers['content-type'], 'application/json');
      assert.equal(request.headers['user-agent'], 'SwitchyardTest/1.0');
      assert.equal(request.headers['x-key'], 'static-value');
      assert.ok(segmentSignatureMatches(request, SECRET), `${type}: signature verifies as Segment documents`);
      assert.equal(request.body, JSON.stringify(JSON.parse(request.body)), `${type}: compact JSON`);
      const payload = JSON.parse(request.body);
      assert.equal(payload.version, 1);
      assert.equal(payload.type, type);
      assert.equal(payload.messageId, `m-${type}`);
      for (const field of ['timestamp', 'receivedAt', 'sentAt', 'originalTimestamp']) assert.equal(typeof payload[field], 'string', `${type}.${field}`);
      assert.ok('userId' in payload, `${type}.userId`);
    }

    const identify = JSON.parse(byType.get('identify')!.body);
    assert.deepEqual(identify.traits, { plan: 'pro' });
    assert.equal(identify.anonymousId, 'anon-1');
    const track = JSON.parse(byType.get('track')!.body);
    assert.equal(track.event, 'Signed Up');
    assert.deepEqual(track.properties, { plan: 'pro' });
    const page = JSON.parse(byType.get('page')!.body);
    assert.deepEqual(page.properties, { title: 'Own title', path: '/p', referrer: 'https://ref.example/', url: 'https://site.example/p' });
    const screen = JSON.parse(byType.get('screen')!.body);
    assert.equal(screen.name, 'Dashboard');
    assert.equal(typeof screen.context, 'object');
    const group = JSON.parse(byType.get('group')!.body);
    assert.equal(group.groupId, 'g1');
    assert.deepEqual(group.traits, { name: 'Acme' });
    const alias = JSON.parse(byType.get('alias')!.body);
    assert.equal(alias['Previous ID'], 'u1');
    assert.equal(alias['User ID'], 'u2');
    assert.equal(alias.previousId, 'u1');
    assert.equal(alias.userId, 'u2');

    const deliveries = await eventually(async () => {
      const all = await listDeliveries(sy, source.id, 'succeeded');
      return all.length === calls.length ? all : undefined;
    }, 10_000, 'every delivery to succeed');
    const detail = await sy.admin('GET', `/deliveries/${deliveries[0].id}`);
    assert.equal(detail.status, 200);
    assert.equal(detail.body.attempts.length, 1);
    const [attempt] = detail.body.attempts;
    assert.equal(attempt.url, receiver.url);
    assert.equal(attempt.statusCode, 200);
    assert.equal(typeof attempt.durationMs, 'number');
    assert.ok(!Number.isNaN(Date.parse(attempt.at)) && attempt.at.endsWith('Z'));
  });

  it('sends no X-Signature without a shared secret, and counts deliveries in /metrics', async () => {
    const unsigned = await startReceiver();
    try {
      const other = await sourceWithWebhooks(sy, [unsigned.url]);
      assert.equal((await sy.send('/v1/track', other.writeKey, { userId: 'u9', event: 'E' })).status, 200);
      const [request] = await unsigned.waitFor(1);
      assert.equal(request!.headers['x-signature'], undefined);
      const metrics = await eventually(async () => {
        const text = await (await fetch(`${sy.url}/metrics`)).text();
        return /switchyard_deliveries_finished_total\{status="succeeded"\} [1-9]/.test(text) ? text : undefined;
      }, 10_000, 'the delivery metrics');
      assert.match(metrics, /switchyard_delivery_attempts_total\{outcome="2xx"\} [1-9]/);
      assert.match(metrics, /switchyard_delivery_lag_seconds_count [1-9]/);
    } finally {
      await unsigned.close();
    }
  });
});
