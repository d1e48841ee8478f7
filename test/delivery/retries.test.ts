import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, sourceWithWebhooks, waitForDelivery, waitForOnlyDelivery } from '../helpers/webhooks.js';

describe('retries and what is not retried', () => {
  let sy: TestSwitchyard;
  const receivers: TestReceiver[] = [];
  const receiver = async (): Promise<TestReceiver> => {
    const started = await startReceiver();
    receivers.push(started);
    return started;
  };

  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'delivery-timeout-ms': '300' });
  });
  after(async () => {
    await sy?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  for (const status of [500, 503, 408, 429]) {
    it(`retries after ${status} until the receiver accepts`, async () => {
      const target = await receiver();
      target.reply = (_request, index) => ({ status: index < 2 ? status : 200 });
      const source = await sourceWithWebhooks(sy, [target.url]);
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' })).status, 200);
      const delivery = await waitForOnlyDelivery(sy, source.id, 'succeeded');
      assert.deepEqual(delivery.attempts.map((a: any) => a.statusCode), [status, status, 200]);
      assert.equal(delivery.attemptCount, 3);
      assert.equal(target.requests.length, 3);
      assert.equal(new Set(target.requests.map((r) => JSON.parse(r.body).messageId)).size, 1, 'the same message each time');
    });
  }

  it('retries a receiver that does not answer within the timeout', async () => {
    const target = await receiver();
    target.reply = (_request, index) => (index === 0 ? { status: 200, delayMs: 3_000 } : { status: 200 });
    const source = await sourceWithWebhooks(sy, [target.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'succeeded');
    assert.equal(delivery.attempts.length, 2);
    assert.match(delivery.attempts[0].error, /timeout after 300 ms/);
    assert.equal(delivery.attempts[0].statusCode, undefined);
    assert.equal(delivery.attempts[1].statusCode, 200);
  });

  it('keeps an answer whose body is endless or stalls: the status counts, the POST still ends in time', async () => {
    const bodies = ['endless', 'stalled'];
    const server = createServer((request, response) => {
      request.resume();
      const kind = bodies[Math.min(calls++, 1)];
      response.writeHead(200, { 'content-type': 'text/plain' });
      if (kind === 'stalled') {
        response.write('a little, then nothing');
        return;
      }
      // 1 MB a second, for ever: far past what a worker reads of an answer.
      const pump = setInterval(() => response.write(Buffer.alloc(16 * 1024, 120)), 16);
      response.on('close', () => clearInterval(pump));
    });
    let calls = 0;
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const source = await sourceWithWebhooks(sy, [url]);
      for (const event of bodies) {
        await sy.send('/v1/track', source.writeKey, { userId: 'u1', event });
      }
      const listed = await eventually(async () => {
        const all = await listDeliveries(sy, source.id);
        return all.length === 2 && all.every((d: any) => d.status === 'succeeded') ? all : undefined;
      }, 10_000, 'both deliveries to succeed');
      for (const { id } of listed) {
        const delivery = await waitForDelivery(sy, id, 'succeeded');
        assert.equal(delivery.attempts.length, 1);
        assert.equal(delivery.attempts[0].statusCode, 200);
        assert.ok(delivery.attempts[0].durationMs < 2_000, `ended in ${delivery.attempts[0].durationMs} ms`);
      }
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('gives up when the retry window closes, keeps the delivery as failed, and retries it by hand', async () => {
    const target = await receiver();
    target.reply = () => ({ status: 500 });
    const source = await sourceWithWebhooks(sy, [target.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const failed = await waitForOnlyDelivery(sy, source.id, 'failed');
    assert.ok(failed.attempts.length >= 2, `retried (${failed.attempts.length} attempts)`);
    assert.ok(failed.attempts.every((a: any) => a.statusCode === 500));
    assert.match(failed.lastError, /retry window closed/);
    const windowUsed = Date.parse(failed.updatedAt) - Date.parse(failed.firstAttemptAt);
    assert.ok(windowUsed >= 1_500, `failed only once the window had passed (${windowUsed} ms)`);

    const conflict = await sy.admin('POST', `/deliveries/${failed.id}/retry`);
    assert.equal(conflict.status, 200, 'a failed delivery can be retried');
    assert.deepEqual(conflict.body, { requeued: 1 });
    target.reply = () => ({ status: 204 });
    const done = await waitForDelivery(sy, failed.id, 'succeeded', 20_000);
    assert.equal(done.attempts.at(-1).statusCode, 204);

    const again = await sy.admin('POST', `/deliveries/${failed.id}/retry`);
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'delivery_not_failed');
  });

  it('requeues every failed delivery of a source with POST /deliveries/retry', async () => {
    const target = await receiver();
    target.reply = () => ({ status: 400 });
    const source = await sourceWithWebhooks(sy, [target.url]);
    for (let i = 0; i < 3; i++) await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: `E${i}` });
    const deliveries = await listDeliveries(sy, source.id);
    for (const d of deliveries) await waitForDelivery(sy, d.id, 'failed');

    target.reply = () => ({ status: 200 });
    const future = await sy.admin('POST', '/deliveries/retry', { sourceId: source.id, since: new Date(Date.now() + 60_000).toISOString() });
    assert.deepEqual(future.body, { requeued: 0 }, 'nothing failed after a future time');
    const requeued = await sy.admin('POST', '/deliveries/retry', { sourceId: source.id });
    assert.equal(requeued.status, 200);
    assert.deepEqual(requeued.body, { requeued: 3 });
    for (const d of deliveries) await waitForDelivery(sy, d.id, 'succeeded');
  });

  for (const status of [400, 404, 410, 422]) {
    it(`does not retry ${status}`, async () => {
      const target = await receiver();
      target.reply = () => ({ status });
      const source = await sourceWithWebhooks(sy, [target.url]);
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
      const delivery = await waitForOnlyDelivery(sy, source.id, 'failed');
      assert.equal(delivery.attempts.length, 1);
      assert.equal(delivery.attempts[0].statusCode, status);
      assert.match(delivery.lastError, new RegExp(`HTTP ${status}`));
      assert.equal(target.requests.length, 1);
    });
  }

  it('does not follow redirects, nor retry them', async () => {
    const elsewhere = await receiver();
    const target = await receiver();
    target.reply = () => ({ status: 307, headers: { location: elsewhere.url } });
    const source = await sourceWithWebhooks(sy, [target.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'failed');
    assert.deepEqual(delivery.attempts.map((a: any) => a.statusCode), [307]);
    assert.equal(elsewhere.requests.length, 0, 'the redirect target got nothing');
  });

  it('answers the delivery routes with typed errors', async () => {
    assert.equal((await sy.admin('GET', '/deliveries/999999')).body.error.code, 'not_found');
    assert.equal((await sy.admin('GET', '/deliveries/abc')).body.error.code, 'invalid_request');
    assert.equal((await sy.admin('GET', '/deliveries?status=lost')).body.error.code, 'invalid_request');
    assert.equal((await sy.admin('GET', '/deliveries?limit=0')).body.error.code, 'invalid_request');
    assert.equal((await sy.admin('POST', '/deliveries/999999/retry')).status, 404);
    assert.equal((await sy.admin('POST', '/deliveries/retry', { sourceId: 'src_nope' })).status, 404);
    assert.equal((await sy.admin('POST', '/deliveries/retry', { since: 'yesterday' })).body.error.code, 'invalid_request');
    assert.equal((await sy.admin('POST', '/deliveries/retry', { color: 'red' })).body.error.code, 'invalid_request');
    const unauthorized = await fetch(`${sy.url}/admin/v1/deliveries`);
    assert.equal(unauthorized.status, 401);
  });
});

describe('Retry-After', () => {
  let sy: TestSwitchyard;
  let target: TestReceiver;

  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'retry-max-delay-ms': '5000', 'retry-window-ms': '20000' });
    target = await startReceiver();
  });
  after(async () => {
    await sy?.close();
    await target?.close();
  });

  it('waits at least as long as a 429 asks, in seconds or as an HTTP date', async () => {
    const asks = ['1', new Date(Date.now() + 2_000).toUTCString()];
    target.reply = (_request, index) => (index < asks.length ? { status: 429, headers: { 'retry-after': asks[index]! } } : { status: 200 });
    const source = await sourceWithWebhooks(sy, [target.url]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'E' });
    const delivery = await waitForOnlyDelivery(sy, source.id, 'succeeded', 20_000);
    const at = delivery.attempts.map((a: any) => Date.parse(a.at));
    assert.deepEqual(delivery.attempts.map((a: any) => a.statusCode), [429, 429, 200]);
    assert.ok(at[1] - at[0] >= 1_000, `Retry-After: 1 honoured (${at[1] - at[0]} ms)`);
    assert.ok(at[2] >= Date.parse(asks[1]!), 'the HTTP date honoured');
  });
});
