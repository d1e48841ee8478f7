import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, waitForDelivery } from '../helpers/webhooks.js';

/** The sandbox's limits for each server here: calls short enough for the tests that time out, a small heap. */
const SANDBOX: Readonly<Record<string, string>> = { 'transform-timeout-ms': '3000', 'transform-memory-mb': '32' };

/** Segment's destination function shape: posts the event to settings.url with the API key, retries 5xx. */
const POSTER = `
async function onTrack(event, settings) {
  const url = new URL(settings.url);
  url.searchParams.set('event', event.event);
  console.log('sending', event.event, 'with', settings.apiKey);
  const res = await fetch(url.toString(), {
    method: 'POST',
    headers: new Headers({ Authorization: 'Bearer ' + settings.apiKey, 'Content-Type': 'application/json' }),
    body: JSON.stringify({ id: event.messageId, name: event.event, tag: event.properties && event.properties.tag }),
  });
  console.log('got', res.status);
  if (res.status >= 500) throw new RetryError('receiver said ' + res.status);
  if (res.status === 302) console.log('redirect to', res.headers.get('location'));
  if (event.event === 'Invalid') throw new InvalidEventPayload('no good');
  if (event.event === 'Boom') throw new Error('boom');
  if (event.event === 'Many') { for (let i = 0; i < 11; i++) await fetch(settings.url + '/many/' + i); }
}
async function onIdentify(event, settings) {
  await fetch(settings.url + '/identify/' + event.userId, { method: 'PUT', body: JSON.stringify(event.traits || {}) });
}
async function onDelete(event, settings) {
  await fetch(settings.url + '/delete/' + event.userId, { method: 'DELETE' });
}
`;

function functionSuite(storeName: string, flags: () => Record<string, string>, strictFlags: () => Record<string, string>): void {
  describe(`function destinations (${storeName})`, () => {
    let sy: TestSwitchyard;
    let strict: TestSwitchyard;
    let receiver: TestReceiver;
    let webhookReceiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      webhookReceiver = await startReceiver();
      sy = await startTestSwitchyard({ ...SANDBOX, ...FAST_RETRIES, 'retry-window-ms': '20000', ...flags() });
      strict = await startTestSwitchyard({ ...SANDBOX, ...strictFlags() });
    });
    after(async () => {
      await sy?.close();
      await strict?.close();
      await receiver?.close();
      await webhookReceiver?.close();
    });

    const addFunction = async (target: TestSwitchyard, sourceId: string, body: Record<string, unknown>) => {
      const created = await target.admin('POST', `/sources/${sourceId}/destinations/functions`, body);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return created.body as { id: string; name: string; version: number };
    };
    const functionDeliveries = async (sourceId: string) => (await listDeliveries(sy, sourceId)).filter((d) => d.destination === 'function');
    const requestsTagged = (tag: string) => receiver.requests.filter((r) => r.body.includes(tag));

    it('tells code written as a module (a transformation\'s habit) or with const handlers what to write instead', async () => {
      const source = await sy.createSource('fn-module-habit');
      const post = (code: string) => sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'habit', code });
      const exported = await post('// as a transformation is written\nexport async function onTrack(event, settings) {}');
      assert.equal(exported.status, 400);
      assert.equal(exported.body.error.code, 'invalid_function');
      assert.match(exported.body.error.message, /^Unexpected token 'export' \(line 2, column 1\): this code is a script, not a module: remove `export`/);
      const arrow = await post('const onTrack = async (event, settings) => {};');
      assert.equal(arrow.body.error.code, 'invalid_function');
      assert.match(arrow.body.error.message, /declares onTrack with const, let or class, which the host cannot call: write `async function onTrack\(event, settings\) \{…\}`/);
      // The same through the test route.
      const tested = await sy.admin('POST', '/functions/test', { code: 'export function onIdentify() {}', events: [{ type: 'identify', userId: 'u1' }] });
      assert.equal(tested.status, 400);
      assert.match(tested.body.error.message, /remove `export`/);
    });

    it('says where in the code a handler threw, through the test route and on the delivery\'s attempt', async () => {
      const code = 'async function onTrack(event) {\n  const total = event.properties.cart.total;\n  throw new ValidationError(`total ${total} too high`);\n}';
      const tested = await sy.admin('POST', '/functions/test', { code, events: [{ type: 'track', event: 'X', properties: {} }, { type: 'track', event: 'Y', properties: { cart: { total: 5 } } }] });
      assert.equal(tested.status, 200);
      assert.equal(tested.body.results[0].error, "Cannot read properties of undefined (reading 'total') (line 2, column 39)");
      assert.equal(tested.body.results[1].errorType, 'ValidationError');
      assert.equal(tested.body.results[1].error, 'total 5 too high (line 3, column 9)');
      const source = await sy.createSource('fn-error-position');
      await addFunction(sy, source.id, { name: 'Thrower', code });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Z', properties: {} });
      const delivery = await eventually(async () => (await listDeliveries(sy, source.id, 'failed'))[0]);
      assert.match(delivery.lastError, /\(line 2, column 39\)$/);
    });

    it('creates, versions, masks settings and refuses bad code, a sixth function and a taken name', async () => {
      const source = await sy.createSource('fn-admin');
      const bad = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'bad', code: 'async function onTrack(e) {\n  return e +;\n}' });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_function');
      assert.match(bad.body.error.message, /line 2, column 13/);
      const none = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'none', code: 'const x = 1;' });
      assert.equal(none.body.error.code, 'invalid_function');
      const huge = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'huge', code: POSTER, settings: { blob: 'x'.repeat(70 * 1024) } });
      assert.equal(huge.status, 400);
      assert.match(huge.body.error.message, /64 KB/);

      const created = await addFunction(sy, source.id, { name: 'Chat', code: POSTER, settings: { url: receiver.url, apiKey: 'sk_live_abcdef', channel: '#general' } });
      assert.equal(created.version, 1);
      assert.match(created.id, /^fn_/);
      const read = await sy.admin('GET', `/sources/${source.id}/destinations/functions/${created.id}`);
      assert.deepEqual(read.body.settings, { url: receiver.url, apiKey: '********', channel: '#general' });
      assert.equal(read.body.code, POSTER);

      // A read sent back (masked) keeps the secret; new code is version 2.
      const updated = await sy.admin('PUT', `/sources/${source.id}/destinations/functions/${created.id}`, { code: POSTER + '\n// v2', settings: { ...read.body.settings, channel: '#ops' } });
      assert.equal(updated.status, 200, JSON.stringify(updated.body));
      assert.equal(updated.body.version, 2);
      const stored = await sy.store.getFunctionDestination(created.id);
      assert.deepEqual(stored?.settings, { url: receiver.url, apiKey: 'sk_live_abcdef', channel: '#ops' });
      assert.equal((await sy.store.getFunctionCode(created.id, 1))?.code, POSTER);

      const taken = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'Chat', code: POSTER });
      assert.equal(taken.status, 409);
      assert.equal(taken.body.error.code, 'function_name_taken');
      for (let i = 2; i <= 5; i++) await addFunction(sy, source.id, { name: `F${i}`, code: POSTER, enabled: false });
      const sixth = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'F6', code: POSTER });
      assert.equal(sixth.status, 409);
      assert.equal(sixth.body.error.code, 'function_limit_reached');
      assert.equal((await sy.admin('GET', `/sources/${source.id}/destinations/functions`)).body.functions.length, 5);

      // Another source cannot read it.
      const other = await sy.createSource('fn-other');
      assert.equal((await sy.admin('GET', `/sources/${other.id}/destinations/functions/${created.id}`)).status, 404);
      assert.equal((await sy.admin('DELETE', `/sources/${source.id}/destinations/functions/${created.id}`)).status, 204);
      assert.equal((await sy.admin('GET', `/sources/${source.id}/destinations/functions/${created.id}`)).status, 404);
    });

    it('delivers with fetch and records the fetches and logs of each attempt, secrets masked', async () => {
      const source = await sy.createSource('fn-deliver');
      const fn = await addFunction(sy, source.id, { name: 'Chat', code: POSTER, settings: { url: receiver.url, apiKey: 'sk_live_deliver' } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Signed Up', properties: { tag: `deliver-${source.id}` } });
      const [request] = await receiver.waitFor(1).then(() => eventually(() => (requestsTagged(`deliver-${source.id}`).length > 0 ? requestsTagged(`deliver-${source.id}`) : undefined)));
      assert.equal(request!.method, 'POST');
      assert.equal(request!.headers['authorization'], 'Bearer sk_live_deliver');
      assert.match(request!.path, /event=Signed\+Up/);
      const [delivery] = await functionDeliveries(source.id);
      assert.equal(delivery.functionId, fn.id);
      const detail = await waitForDelivery(sy, delivery.id, 'succeeded');
      const attempt = detail.attempts[0];
      assert.equal(attempt.url, `function:${fn.id}`);
      assert.equal(attempt.function.outcome, 'delivered');
      assert.equal(attempt.function.version, 1);
      assert.equal(attempt.function.fetches.length, 1);
      assert.equal(attempt.function.fetches[0].method, 'POST');
      assert.equal(attempt.function.fetches[0].status, 200);
      assert.deepEqual(attempt.function.logs, ['sending Signed Up with ********', 'got 200']);
      assert.doesNotMatch(JSON.stringify(detail), /sk_live_deliver/);
      const metrics = await (await fetch(`${sy.url}/metrics`)).text();
      const heap = new RegExp(`switchyard_sandbox_heap_bytes\\{kind="function",id="${fn.id}"\\} (\\d+)`).exec(metrics);
      assert.ok(heap !== null && Number(heap[1]) > 0, 'the heap of the function\'s isolate is in /metrics');
    });

    it('retries RetryError with backoff until it succeeds; fails at once on EventNotSupported, InvalidEventPayload and other throws', async () => {
      const source = await sy.createSource('fn-outcomes');
      await addFunction(sy, source.id, { name: 'Chat', code: POSTER, settings: { url: receiver.url, apiKey: 'k' } });
      const tag = `retry-${source.id}`;
      let failures = 0;
      receiver.reply = (request) => (request.body.includes(tag) && failures++ < 2 ? { status: 503 } : { status: 200 });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Retried', properties: { tag } });
      const [retried] = await functionDeliveries(source.id);
      const done = await waitForDelivery(sy, retried.id, 'succeeded');
      assert.equal(done.attempts.length, 3);
      assert.deepEqual(done.attempts.map((a: any) => a.function.outcome), ['retry', 'retry', 'delivered']);
      assert.equal(done.attempts[0].function.errorType, 'RetryError');
      receiver.reply = () => ({ status: 200 });

      await sy.send('/v1/page', source.writeKey, { userId: 'u1', name: 'Home' });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Invalid', properties: { tag: `invalid-${source.id}` } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Boom', properties: { tag: `boom-${source.id}` } });
      const failed = await eventually(async () => {
        const list = (await listDeliveries(sy, source.id, 'failed')).filter((d) => d.destination === 'function');
        return list.length === 3 ? list : undefined;
      });
      const types: string[] = [];
      for (const delivery of failed) {
        const detail = (await sy.admin('GET', `/deliveries/${delivery.id}`)).body;
        assert.equal(detail.attempts.length, 1, 'failed at once, not retried');
        types.push(detail.attempts[0].function.errorType);
      }
      assert.deepEqual(types.sort(), ['Error', 'EventNotSupported', 'InvalidEventPayload']);

      // A failed delivery retried by hand runs the handler again.
      const boom = failed.find((d) => d.lastError.includes('boom'));
      assert.equal((await sy.admin('POST', `/deliveries/${boom.id}/retry`)).status, 200);
      const again = await eventually(async () => {
        const detail = (await sy.admin('GET', `/deliveries/${boom.id}`)).body;
        return detail.attempts.length === 2 && detail.status === 'failed' ? detail : undefined;
      });
      assert.equal(again.attempts[1].function.errorType, 'Error');
    });

    it('does not follow redirects, refuses an 11th fetch, and skips a message whose integrations turn it off', async () => {
      const source = await sy.createSource('fn-rules');
      await addFunction(sy, source.id, { name: 'Chat', code: POSTER, settings: { url: receiver.url, apiKey: 'k' } });
      const tag = `redirect-${source.id}`;
      receiver.reply = (request) => (request.body.includes(tag) ? { status: 302, headers: { location: 'http://example.invalid/elsewhere' } } : { status: 200 });
      const before = receiver.requests.length;
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Moved', properties: { tag } });
      const [moved] = await functionDeliveries(source.id);
      const detail = await waitForDelivery(sy, moved.id, 'succeeded');
      assert.equal(detail.attempts[0].function.fetches[0].status, 302);
      assert.ok(detail.attempts[0].function.logs.includes('redirect to http://example.invalid/elsewhere'));
      assert.equal(receiver.requests.length - before, 1, 'the redirect was not followed');
      receiver.reply = () => ({ status: 200 });

      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Many', properties: { tag: `many-${source.id}` } });
      const many = await eventually(async () => (await listDeliveries(sy, source.id, 'failed')).find((d) => d.destination === 'function'));
      const manyDetail = (await sy.admin('GET', `/deliveries/${many.id}`)).body;
      const fetches = manyDetail.attempts[0].function.fetches;
      // The POST and nine more went out; the eleventh request of the call was refused and its TypeError failed the call.
      assert.equal(fetches.length, 11);
      assert.match(fetches[10].error, /at most 10 requests per call/);
      assert.equal(manyDetail.status, 'failed');
      assert.equal(receiver.requests.filter((r) => r.path.includes('/many/9')).length, 0);
      assert.ok(receiver.requests.some((r) => r.path.includes('/many/8')));

      const webhooks = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: webhookReceiver.url }] } });
      assert.equal(webhooks.status, 200);
      const countBefore = (await listDeliveries(sy, source.id)).length;
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Skipped', properties: {}, integrations: { Chat: false } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'None', properties: {}, integrations: { All: false } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'OnlyChat', properties: {}, integrations: { All: false, Chat: true } });
      const after = (await listDeliveries(sy, source.id)).slice(0, (await listDeliveries(sy, source.id)).length - countBefore);
      assert.deepEqual(after.map((d) => d.destination).sort(), ['function', 'webhooks']);
    });

    it('refuses private addresses unless they are allowed, in deliveries and in tests', async () => {
      const source = await strict.createSource('fn-strict');
      const fn = await addFunction(strict, source.id, { name: 'Chat', code: POSTER, settings: { url: receiver.url, apiKey: 'k' } });
      const before = receiver.requests.length;
      await strict.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Private', properties: { tag: `private-${source.id}` } });
      const delivery = await eventually(async () => (await listDeliveries(strict, source.id, 'failed'))[0]);
      const detail = (await strict.admin('GET', `/deliveries/${delivery.id}`)).body;
      assert.equal(detail.functionId, fn.id);
      assert.match(detail.attempts[0].function.fetches[0].error, /private address refused/);
      const tested = await strict.admin('POST', '/functions/test', { code: POSTER, settings: { url: receiver.url, apiKey: 'k' }, events: [{ type: 'track', event: 'X', properties: {} }] });
      assert.equal(tested.status, 200);
      assert.equal(tested.body.results[0].outcome, 'failed');
      assert.match(tested.body.results[0].fetches[0].error, /private address refused/);
      assert.equal(receiver.requests.length, before, 'nothing reached the private receiver');

      const allowed = await sy.admin('POST', '/functions/test', { code: POSTER, settings: { url: receiver.url, apiKey: 'k' }, events: [{ type: 'track', event: 'X', properties: { tag: 'tested' } }, { type: 'screen', name: 'S' }] });
      assert.deepEqual(allowed.body.results.map((r: any) => r.outcome), ['delivered', 'failed']);
      assert.equal(allowed.body.results[1].errorType, 'EventNotSupported');
    });

    it('a slow function does not hold up the Webhooks delivery of the same source', async () => {
      const source = await sy.createSource('fn-slow');
      await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: webhookReceiver.url }] } });
      await addFunction(sy, source.id, { name: 'Chat', code: POSTER, settings: { url: receiver.url, apiKey: 'k' } });
      const tag = `slow-${source.id}`;
      receiver.reply = (request) => (request.body.includes(tag) ? { hang: true } : { status: 200 });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'First', properties: { tag } });
      await eventually(() => (receiver.hanging() > 0 ? true : undefined));
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Second', properties: { tag: `fast-${source.id}` } });
      await eventually(() => (webhookReceiver.requests.some((r) => r.body.includes(`fast-${source.id}`)) ? true : undefined));
      // The second message reached the webhook while the function's call for the first still hangs.
      assert.equal(receiver.hanging(), 1);
      const firstCall = (await functionDeliveries(source.id)).find((d) => d.attemptCount === 0);
      assert.ok(firstCall !== undefined, 'the function call is still in flight');
      receiver.release(200);
      receiver.reply = () => ({ status: 200 });
    });

    it('calls one function for several messages at once, each attempt with its own fetches and logs', async () => {
      const api = await startReceiver();
      try {
        // Every call waits on its fetch until all of them are in flight together.
        api.reply = () => ({ hang: true });
        const source = await sy.createSource('fn-concurrent');
        const code = `
async function onTrack(event, settings) {
  console.log('for', event.messageId);
  const res = await fetch(settings.url + '/' + event.messageId);
  console.log('got', res.status, 'for', event.messageId);
}`;
        await addFunction(sy, source.id, { name: 'Parallel', code, settings: { url: api.url } });
        const ids = Array.from({ length: 8 }, (_, i) => `par-${source.id}-${i}`);
        for (const messageId of ids) await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Parallel', messageId });
        await eventually(() => (api.hanging() === ids.length ? true : undefined), 10_000, 'every call in flight at once');
        api.release(200);
        const deliveries = await eventually(async () => {
          const found = await functionDeliveries(source.id);
          return found.length === ids.length && found.every((d) => d.status === 'succeeded') ? found : undefined;
        });
        for (const delivery of deliveries) {
          const detail = await waitForDelivery(sy, delivery.id, 'succeeded');
          const run = detail.attempts[0].function;
          const messageId = String(run.logs[0]).slice('for '.length);
          assert.ok(ids.includes(messageId), JSON.stringify(run));
          assert.deepEqual(run.logs, [`for ${messageId}`, `got 200 for ${messageId}`]);
          assert.deepEqual(run.fetches.map((f: { url: string }) => f.url), [`${api.url}/${messageId}`]);
        }
      } finally {
        await api.close();
      }
    });
  });
}

functionSuite('sqlite', () => ({}), () => ({}));

await describePostgres('function destinations on PostgreSQL', () => {
  let db: FreshDatabase;
  let strictDb: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
    strictDb = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
    await strictDb?.drop();
  });
  functionSuite('postgres', () => ({ 'database-url': db.url }), () => ({ 'database-url': strictDb.url }));
});
