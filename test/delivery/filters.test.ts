import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { segmentSignatureMatches } from '../helpers/webhooks.js';

describe('destination filters', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;

  before(async () => {
    receiver = await startReceiver();
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  const put = (sourceId: string, filters: unknown, extra: Record<string, unknown> = {}) =>
    sy.admin('PUT', `/sources/${sourceId}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: receiver.url }], sharedSecret: 'filter-secret', ...extra },
      filters,
    });

  const received = (messageId: string) => receiver.requests.filter((r) => JSON.parse(r.body).messageId === messageId);

  it('refuses an invalid filter with invalid_filter, naming the field', async () => {
    const { id } = await sy.createSource('bad-filters');
    const cases: Array<[unknown, RegExp]> = [
      [[{ title: 't', if: { field: 'event', op: '~', value: 'x' }, action: 'drop' }], /filters\[0\]\.if\.op must be one of/],
      [[{ title: 'ok', action: 'keep' }, { title: 't', action: 'explode' }], /filters\[1\]\.action must be "drop", "keep"/],
      [[{ title: 't', if: { and: [{ field: 'type', op: 'exists', value: 1 }] }, action: 'drop' }], /filters\[0\]\.if\.and\[0\]\.value must be absent/],
      [[{ action: 'drop' }], /filters\[0\]\.title/],
      [[{ title: 't', action: { dropFields: ['properties..x'] } }], /filters\[0\]\.action\.dropFields\[0\]/],
      ['drop', /filters must be an array/],
    ];
    for (const [filters, message] of cases) {
      const answer = await put(id, filters);
      assert.equal(answer.status, 400, JSON.stringify(filters));
      assert.equal(answer.body.error.code, 'invalid_filter');
      assert.match(answer.body.error.message, message);
    }
    const inSettings = await sy.admin('PUT', `/sources/${id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: receiver.url }], filters: [] },
    });
    assert.equal(inSettings.body.error.code, 'invalid_filter');
  });

  it('drops, keeps and removes fields in order; a dropped message is "filtered" with no delivery', async () => {
    const source = await sy.createSource('filters');
    const filters = [
      { title: 'no pings', if: { field: 'event', op: '=', value: 'Ping' }, action: 'drop' },
      { title: 'tracks and identifies only', if: { or: [{ field: 'type', op: '=', value: 'track' }, { field: 'type', op: '=', value: 'identify' }] }, action: 'keep' },
      { title: 'no PII', if: { field: 'properties.email', op: 'exists' }, action: { dropFields: ['properties.email', 'context.ip'] } },
    ];
    const saved = await put(source.id, filters);
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/destinations/webhooks`)).body.filters, filters);

    const batch = [
      { type: 'track', userId: 'u1', event: 'Ping', messageId: 'f-ping' },
      { type: 'page', userId: 'u1', name: 'Home', messageId: 'f-page' },
      { type: 'track', userId: 'u1', event: 'Bought', properties: { email: 'a@b.c', sku: 'x' }, context: { ip: '203.0.113.9' }, messageId: 'f-pii' },
      { type: 'identify', userId: 'u1', traits: { plan: 'pro' }, messageId: 'f-identify' },
    ];
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);

    await eventually(() => (received('f-pii').length > 0 && received('f-identify').length > 0 ? true : undefined), 10_000, 'the kept messages');
    const [pii] = received('f-pii');
    const sent = JSON.parse(pii!.body);
    assert.equal(sent.properties.email, undefined, 'properties.email removed');
    assert.equal(sent.properties.sku, 'x', 'other properties stay');
    assert.equal(sent.context.ip, undefined, 'context.ip removed');
    assert.ok(segmentSignatureMatches(pii!, 'filter-secret'), 'signed after the fields were removed');

    const { body } = await sy.admin('GET', `/sources/${source.id}/debugger`);
    const byId = new Map(body.messages.map((m: any) => [m.message.messageId, m]));
    assert.deepEqual([(byId.get('f-ping') as any).status, (byId.get('f-ping') as any).reason], ['filtered', 'filter "no pings"']);
    assert.deepEqual([(byId.get('f-page') as any).status, (byId.get('f-page') as any).reason], ['filtered', 'filter "tracks and identifies only"']);
    assert.equal((byId.get('f-pii') as any).status, 'accepted');
    assert.equal((byId.get('f-pii') as any).message.properties.email, 'a@b.c', 'the stored message keeps what delivery removed');

    const deliveries = (await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries as Array<{ messageId: string }>;
    assert.deepEqual(deliveries.map((d) => d.messageId).sort(), ['f-identify', 'f-pii'], 'filtered messages create no delivery');
    assert.equal(received('f-ping').length + received('f-page').length, 0);
  });

  it('applies a filter change to the next message', async () => {
    const source = await sy.createSource('filters-change');
    assert.equal((await put(source.id, [{ title: 'everything', action: 'drop' }])).status, 200);
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'E', messageId: 'f-before' });
    assert.equal((await put(source.id, [])).status, 200);
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'E', messageId: 'f-after' });
    await eventually(() => (received('f-after').length > 0 ? true : undefined), 10_000, 'the message after the change');
    assert.equal(received('f-before').length, 0);
  });
});
