import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { type TestSwitchyard, basicAuth, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

describe('Tracking API', () => {
  let sy: TestSwitchyard;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard();
    source = await sy.createSource('tracking');
  });
  after(async () => {
    await sy.close();
  });

  const stored = async (sourceId = source.id, limit = 10) => sy.store.listRecentMessages(sourceId, limit);
  /** A POST as the client sends it; after a 200, waits until it is processed into messages. */
  const raw = async (route: string, init: RequestInit): Promise<Response> => {
    const response = await fetch(sy.url + route, { method: 'POST', ...init });
    if (response.status === 200) await sy.processed();
    return response;
  };

  it('accepts every call on its long and short path, typed by the path', async () => {
    const paths: Array<[string, string, object]> = [
      ['/v1/identify', 'identify', { traits: { a: 1 } }],
      ['/v1/i', 'identify', {}],
      ['/v1/track', 'track', { event: 'E' }],
      ['/v1/t', 'track', { event: 'E' }],
      ['/v1/page', 'page', { name: 'Home' }],
      ['/v1/p', 'page', {}],
      ['/v1/screen', 'screen', { name: 'Main' }],
      ['/v1/s', 'screen', {}],
      ['/v1/group', 'group', { groupId: 'g1' }],
      ['/v1/g', 'group', { groupId: 'g1' }],
      ['/v1/alias', 'alias', { previousId: 'old' }],
      ['/v1/a', 'alias', { previousId: 'old' }],
    ];
    const own = await sy.createSource('paths');
    for (const [route, , extra] of paths) {
      const response = await sy.send(route, own.writeKey, { userId: 'u1', messageId: `path-${route}`, ...extra });
      assert.deepEqual(response, { status: 200, body: { success: true } }, route);
    }
    const messages = (await stored(own.id, 20)).reverse();
    assert.deepEqual(
      messages.map((m) => [m.status, m.type]),
      paths.map(([, type]) => ['accepted', type]),
    );
  });

  it('accepts batches on /v1/batch, /v1/b and /v1/import; bad elements are dropped alone', async () => {
    const own = await sy.createSource('batches');
    for (const route of ['/v1/batch', '/v1/b', '/v1/import']) {
      const response = await sy.send(route, own.writeKey, {
        batch: [
          { type: 'track', userId: 'u', event: 'Good', messageId: `${route}-1` },
          { type: 'track', userId: 'u', messageId: `${route}-2` },
          { type: 'bogus', userId: 'u' },
          'not an object',
        ],
        context: { locale: 'de' },
      });
      assert.equal(response.status, 200, route);
    }
    const messages = await stored(own.id, 20);
    assert.equal(messages.filter((m) => m.status === 'accepted').length, 3);
    assert.equal(messages.filter((m) => m.status === 'rejected').length, 9);
    const good = messages.find((m) => m.status === 'accepted')!;
    assert.deepEqual(JSON.parse(good.body).context, { locale: 'de' });
    assert.deepEqual(
      new Set(messages.filter((m) => m.status === 'rejected').map((m) => m.reason)),
      new Set(['track call without event', 'batch element without a valid type (got "bogus")', 'batch element is not a JSON object']),
    );
  });

  it('reads the write key from the body of a text/plain call (as browsers send it)', async () => {
    const response = await raw('/v1/t', {
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ writeKey: source.writeKey, anonymousId: 'anon', event: 'Clicked', messageId: 'browser-1', context: { library: { name: 'analytics.js' } } }),
    });
    assert.equal(response.status, 200);
    const message = (await stored()).find((m) => m.messageId === 'browser-1')!;
    const body = JSON.parse(message.body);
    assert.equal(body.writeKey, undefined, 'the write key is not stored');
    assert.equal(body.context.ip, '127.0.0.1');
  });

  it("takes the client's address from the connection; X-Forwarded-For only when proxies are trusted", async () => {
    const forwarded = { 'x-forwarded-for': ' , 203.0.113.7, 10.0.0.2', authorization: basicAuth(source.writeKey) };
    // Browser libraries' calls get the request's address as context.ip.
    const browser = { library: { name: 'analytics.js' } };
    await raw('/v1/track', { headers: forwarded, body: JSON.stringify({ userId: 'u', event: 'E', messageId: 'ip-untrusted', context: browser }) });
    const untrusted = (await stored()).find((m) => m.messageId === 'ip-untrusted')!;
    assert.equal(JSON.parse(untrusted.body).context.ip, '127.0.0.1', 'a client cannot choose its address');

    const behindProxy = await startTestSwitchyard({ 'trust-proxy': 'true' });
    try {
      const own = await behindProxy.createSource('proxied');
      const answer = await fetch(`${behindProxy.url}/v1/track`, {
        method: 'POST',
        headers: { ...forwarded, authorization: basicAuth(own.writeKey) },
        body: JSON.stringify({ userId: 'u', event: 'E', messageId: 'ip-trusted', context: browser }),
      });
      assert.equal(answer.status, 200);
      await behindProxy.processed();
      const [message] = await behindProxy.store.listRecentMessages(own.id, 1);
      assert.equal(JSON.parse(message!.body).context.ip, '203.0.113.7', "the left-most forwarded address, the client's as the first proxy saw it");
    } finally {
      await behindProxy.close();
    }
  });

  it('answers a path or method it does not serve 404 route_not_found, readable from any origin', async () => {
    for (const [method, route] of [['POST', '/v1/unknown'], ['GET', '/v1/track'], ['POST', '/v1/track/'], ['PUT', '/v1/batch']] as const) {
      const response = await fetch(sy.url + route, { method, headers: { origin: 'https://shop.example' }, ...(method === 'GET' ? {} : { body: '{}' }) });
      assert.equal(response.status, 404, `${method} ${route}`);
      assert.equal(((await response.json()) as { code: string }).code, 'route_not_found', `${method} ${route}`);
      assert.equal(response.headers.get('access-control-allow-origin'), 'https://shop.example', `${method} ${route}`);
    }
  });

  it('answers a path no route takes, and a preflight, before reading the body: a slow body there is not held', async () => {
    for (const [method, route, status] of [['POST', '/v1/unknown', 404], ['POST', '/nothing/here', 404], ['OPTIONS', '/sourceConfig', 204]] as const) {
      const socket = connect(Number(new URL(sy.url).port), '127.0.0.1');
      socket.on('error', () => undefined);
      try {
        // 1 MB declared, a few bytes sent: an answer now means none of the rest was waited for.
        socket.write(`${method} ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"a":"`);
        const [head] = (await once(socket, 'data')) as [Buffer];
        assert.match(head.toString(), new RegExp(`^HTTP/1\\.1 ${status} `), `${method} ${route}`);
      } finally {
        socket.destroy();
      }
    }
  });

  it("refuses a beacon whose query names the write key twice (which one was meant?)", async () => {
    const response = await raw(`/beacon/v1/batch?writeKey=${source.writeKey}&writeKey=${source.writeKey}`, {
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ batch: [{ type: 'track', userId: 'u', event: 'E' }] }),
    });
    assert.equal(response.status, 401);
    assert.equal(((await response.json()) as { code: string }).code, 'invalid_write_key');
  });

  it('reads gzip bodies whatever the Content-Type (RudderStack sends form-urlencoded)', async () => {
    const response = await raw('/v1/batch', {
      headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ batch: [{ type: 'identify', userId: 'gz', messageId: 'gzip-1' }] })),
    });
    assert.equal(response.status, 200);
    assert.ok((await stored()).some((m) => m.messageId === 'gzip-1' && m.status === 'accepted'));
  });

  it('answers 401 for a missing or unknown write key', async () => {
    const attempts: Array<Record<string, string>> = [{}, { authorization: basicAuth('nope') }, { authorization: 'Bearer x' }];
    for (const headers of attempts) {
      const response = await raw('/v1/track', { headers, body: JSON.stringify({ userId: 'u', event: 'E' }) });
      assert.equal(response.status, 401);
      assert.equal(((await response.json()) as any).code, 'invalid_write_key');
    }
    const wrongInBody = await raw('/v1/track', { body: JSON.stringify({ writeKey: `${source.writeKey}x`, userId: 'u', event: 'E' }) });
    assert.equal(wrongInBody.status, 401);
  });

  it('answers 400 with a stable code for bodies that are not a JSON object', async () => {
    const cases: Array<[string | Buffer, Record<string, string>, string]> = [
      ['{"userId":', {}, 'invalid_json'],
      ['', {}, 'invalid_json'],
      ['[{"userId":"u"}]', {}, 'body_not_object'],
      ['"text"', {}, 'body_not_object'],
      ['null', {}, 'body_not_object'],
      [Buffer.from('not gzip'), { 'content-encoding': 'gzip' }, 'invalid_encoding'],
    ];
    for (const [body, headers, code] of cases) {
      const response = await raw('/v1/track', { headers: { authorization: basicAuth(source.writeKey), ...headers }, body });
      assert.equal(response.status, 400, String(body));
      const json = (await response.json()) as any;
      assert.deepEqual([json.success, json.code, typeof json.message], [false, code, 'string']);
    }
    const br = await raw('/v1/track', { headers: { authorization: basicAuth(source.writeKey), 'content-encoding': 'br' }, body: '{}' });
    assert.equal(br.status, 415);
    const notABatch = await sy.send('/v1/batch', source.writeKey, { batch: { type: 'track' } });
    assert.deepEqual([notABatch.status, notABatch.body.code], [400, 'invalid_batch']);
  });

  it('says how to send a gzip body without Content-Encoding, or form fields, rather than quoting where the parse stopped', async () => {
    const gzipped = await raw('/v1/track', { headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/json' }, body: gzipSync(JSON.stringify({ userId: 'u', event: 'E' })) });
    assert.equal(gzipped.status, 400);
    const gz = (await gzipped.json()) as { code: string; message: string };
    assert.equal(gz.code, 'invalid_json');
    assert.equal(gz.message, 'the body is gzip-compressed data, not JSON: send it with the header Content-Encoding: gzip (and compress it once)');
    const form = new FormData();
    form.set('userId', 'u');
    form.set('event', 'E');
    const fields = await raw('/v1/track', { headers: { authorization: basicAuth(source.writeKey) }, body: form });
    assert.equal(fields.status, 400);
    const fj = (await fields.json()) as { code: string; message: string };
    assert.equal(fj.code, 'invalid_json');
    assert.match(fj.message, /^the body is not valid JSON: .*\(sent as multipart\/form-data, as curl -F sends: the body must be one JSON object/);
  });

  it("refuses a batch whose context or integrations nest past a message's limit, and clears their __proto__ keys", async () => {
    const nested = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const element = '{"type":"track","userId":"u","event":"E"}';
    // 20,000 levels overflowed the stack when serialized (a 500). A message may nest 64 levels and its context is level 1, so a context of 65 is one too many and 62 below it (63 with the context) fits.
    for (const [key, levels] of [['context', 20_000], ['context', 65], ['integrations', 65]] as const) {
      const response = await raw('/v1/batch', {
        headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/json' },
        body: `{"batch":[${element}],"${key}":${nested(levels)}}`,
      });
      assert.equal(response.status, 400, `${key} nested ${levels} levels`);
      const json = (await response.json()) as any;
      assert.equal(json.code, 'invalid_batch');
      assert.match(json.message, new RegExp(`"${key}" nests deeper than 64 levels`));
    }
    const atLimit = await raw('/v1/batch', {
      headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/json' },
      body: `{"batch":[{"type":"track","userId":"u","event":"E","messageId":"envelope-ok"}],"context":{"deep":${nested(62)},"__proto__":{"polluted":true}}}`,
    });
    assert.equal(atLimit.status, 200);
    await sy.processed();
    const message = (await stored()).find((m) => m.messageId === 'envelope-ok');
    assert.equal(message?.status, 'accepted');
    assert.ok(!message.body.includes('__proto__'), 'the batch context keeps no __proto__ key');
  });

  it('enforces the size limits after decompression', async () => {
    const pad = (bytes: number) => 'x'.repeat(bytes);
    const call = await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'E', properties: { p: pad(33 * 1024) } });
    assert.deepEqual([call.status, call.body.code], [400, 'body_too_large']);
    const callJustUnder = await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'E', properties: { p: pad(31 * 1024) } });
    assert.equal(callJustUnder.status, 200);

    const element = await sy.send('/v1/batch', source.writeKey, { batch: [{ type: 'track', userId: 'u', event: 'E', properties: { p: pad(33 * 1024) } }] });
    assert.deepEqual([element.status, element.body.code], [400, 'batch_element_too_large']);
    // The element limit applies to the message as stored (with receivedAt
    // and timestamp added here): exactly, not with a margin.
    const sized = (bytes: number, messageId: string) => {
      const element = { type: 'track', userId: 'u', event: 'E', messageId, properties: { p: '' } };
      element.properties.p = pad(bytes - JSON.stringify(element).length);
      return element;
    };
    const nearLimit = await sy.send('/v1/batch', source.writeKey, { batch: [sized(32 * 1024 - 200, 'near-limit')] });
    assert.equal(nearLimit.status, 200, 'an element stored under 32 KB is accepted however close');
    await sy.processed();
    const near = (await stored()).find((m) => m.messageId === 'near-limit');
    assert.equal(near?.status, 'accepted');
    assert.ok(Buffer.byteLength(near.body) > 32 * 1024 - 200 && Buffer.byteLength(near.body) <= 32 * 1024);
    const overOnceStored = await sy.send('/v1/batch', source.writeKey, { batch: [sized(32 * 1024 - 40, 'over-once-stored')] });
    assert.deepEqual([overOnceStored.status, overOnceStored.body.code], [400, 'batch_element_too_large'], 'under 32 KB as sent, over once stored');
    const tooMany = await sy.send('/v1/batch', source.writeKey, { batch: Array.from({ length: 2501 }, () => ({})) });
    assert.deepEqual([tooMany.status, tooMany.body.code], [400, 'too_many_batch_elements']);
    const batch = await sy.send('/v1/batch', source.writeKey, { batch: Array.from({ length: 20 }, () => ({ type: 'track', userId: 'u', event: 'E', p: pad(26 * 1024) })) });
    assert.deepEqual([batch.status, batch.body.code], [400, 'body_too_large']);

    // 50 MB of zeros gzip to ~50 KB: refused once 500 KB have been inflated.
    const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024));
    const response = await raw('/v1/batch', { headers: { authorization: basicAuth(source.writeKey), 'content-encoding': 'gzip' }, body: bomb });
    assert.equal(response.status, 400);
    assert.equal(((await response.json()) as any).code, 'body_too_large');
  });

  it("counts the batch's context and integrations once per element against 1 MB stored, so a small body cannot be stored many times over", async () => {
    const pad = (bytes: number) => 'x'.repeat(bytes);
    const before = (await stored(source.id, 5_000)).length;
    // 2,400 tiny elements under a 30 KB context: ~150 KB as sent (a few KB gzipped), ~74 MB once each element had its copy.
    const amplifying = JSON.stringify({ context: { pad: pad(30 * 1024) }, batch: Array.from({ length: 2_400 }, (_, i) => ({ type: 'track', userId: 'u', event: 'E', messageId: `amp-${i}` })) });
    const gzipped = gzipSync(Buffer.from(amplifying));
    assert.ok(gzipped.length < 16 * 1024, `${gzipped.length} bytes on the wire`);
    const response = await raw('/v1/batch', { headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipped });
    assert.equal(response.status, 400);
    const json = (await response.json()) as any;
    assert.equal(json.code, 'batch_too_large');
    assert.match(json.message, /each of its 2400 messages, over 1024 KB/);
    // integrations count as context does.
    const byIntegrations = await sy.send('/v1/batch', source.writeKey, { integrations: { pad: pad(8 * 1024) }, batch: Array.from({ length: 200 }, () => ({ type: 'track', userId: 'u', event: 'E' })) });
    assert.deepEqual([byIntegrations.status, byIntegrations.body.code], [400, 'batch_too_large']);

    // Under the bound a shared context still goes into every element.
    const shared = await sy.send('/v1/batch', source.writeKey, { context: { pad: pad(4 * 1024) }, batch: Array.from({ length: 200 }, (_, i) => ({ type: 'track', userId: 'u', event: 'E', messageId: `shared-${i}` })) });
    assert.equal(shared.status, 200);
    await sy.processed();
    const after = await stored(source.id, 5_000);
    assert.equal(after.filter((m) => String(m.messageId).startsWith('amp-')).length, 0, 'nothing of the refused batch is stored');
    const sharedMessages = after.filter((m) => String(m.messageId).startsWith('shared-'));
    assert.equal(sharedMessages.length, 200);
    assert.ok(sharedMessages.every((m) => m.status === 'accepted' && JSON.parse(m.body).context.pad.length === 4 * 1024));
    assert.equal(after.length, before + 200);
  });

  it('answers CORS preflights for any origin', async () => {
    const response = await fetch(`${sy.url}/v1/t`, {
      method: 'OPTIONS',
      headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    assert.equal(response.status, 204);
    assert.equal(response.headers.get('access-control-allow-origin'), 'https://shop.example');
    assert.equal(response.headers.get('access-control-allow-headers'), 'authorization, content-type', 'the headers asked for, from the allow-list');
    const post = await raw('/v1/t', { headers: { origin: 'https://shop.example' }, body: JSON.stringify({ writeKey: source.writeKey, userId: 'u', event: 'E' }) });
    assert.equal(post.headers.get('access-control-allow-origin'), 'https://shop.example');
  });

  it('answers /v1/m (client metrics) with 200 and stores nothing', async () => {
    const before = (await stored(source.id, 1000)).length;
    const response = await raw('/v1/m', { headers: { 'content-type': 'text/plain' }, body: '{"series":[]}' });
    assert.equal(response.status, 200);
    assert.equal((await stored(source.id, 1000)).length, before);
  });

  it('bounds /v1/m, which needs no write key, at 32 KB after decompression', async () => {
    const big = JSON.stringify({ series: [{ metric: 'x'.repeat(40 * 1024) }] });
    for (const [what, init] of [
      ['plain', { body: big }],
      ['gzip', { body: gzipSync(big), headers: { 'content-encoding': 'gzip' } }],
    ] as const) {
      const response = await raw('/v1/m', init);
      assert.equal(response.status, 400, what);
      assert.equal(((await response.json()) as { code: string }).code, 'body_too_large', what);
    }
    assert.equal((await raw('/v1/m', { body: JSON.stringify({ series: [{ metric: 'x'.repeat(30 * 1024) }] }) })).status, 200);
  });

  it('stores what the README says a 200 may change, and nothing else', async () => {
    const body = Buffer.concat([
      Buffer.from('{"userId":"u","event":"E","messageId":"changes-1","properties":{"bad":"a'),
      Buffer.from([0xff, 0xfe]), // not UTF-8
      Buffer.from(
        'b","__proto__":{"polluted":true},"huge":1e400,"tiny":-1e400,"negativeZero":-0,' +
          '"big":12345678901234567890,"twice":1,"twice":2,"kept":"caf\\u00e9 \\ud83d\\ude00"}}',
      ),
    ]);
    const response = await raw('/v1/track', { headers: { authorization: basicAuth(source.writeKey) }, body });
    assert.equal(response.status, 200);
    const message = (await stored()).find((m) => m.messageId === 'changes-1')!;
    const properties = JSON.parse(message.body).properties;
    assert.equal(properties.bad, 'a\ufffd\ufffdb', 'invalid UTF-8 becomes U+FFFD');
    assert.ok(!Object.prototype.hasOwnProperty.call(properties, '__proto__'), '__proto__ keys are dropped');
    assert.equal(properties.huge, null, 'out of range becomes null');
    assert.equal(properties.tiny, null);
    assert.ok(Object.is(properties.negativeZero, 0), '-0 becomes 0');
    assert.equal(properties.big, 12345678901234567000, 'integers past 2^53 are rounded to the nearest double');
    assert.equal(properties.twice, 2, 'the last of repeated keys wins');
    assert.equal(properties.kept, 'café 😀');
  });

  it('stores a repeated messageId as a duplicate without routing it again', async () => {
    const own = await sy.createSource('dedupe');
    await sy.store.putDestination({ sourceId: own.id, kind: 'webhooks', enabled: false, settings: {}, updatedAt: Date.now() });
    for (let i = 0; i < 3; i++) {
      assert.equal((await sy.send('/v1/track', own.writeKey, { userId: 'u', event: 'E', messageId: 'dup-1' })).status, 200);
    }
    assert.deepEqual((await stored(own.id)).map((m) => m.status), ['duplicate', 'duplicate', 'accepted']);
  });

  it('creates a delivery job per enabled destination, following integrations', async () => {
    const own = await sy.createSource('routing');
    await sy.store.putDestination({ sourceId: own.id, kind: 'webhooks', enabled: true, settings: {}, updatedAt: Date.now() });
    // The in-memory directory reloads on the store's config notification.
    await eventually(async () => {
      await sy.send('/v1/track', own.writeKey, { userId: 'probe', event: 'E' });
      return (await sy.store.listDeliveries({ sourceId: own.id, limit: 1 })).length > 0 ? true : undefined;
    });
    const cases: Array<[string, object | undefined, boolean]> = [
      ['none', undefined, true],
      ['webhooks-off', { Webhooks: false }, false],
      ['all-off', { All: false }, false],
      ['all-off-webhooks-on', { All: false, Webhooks: true }, true],
      ['lowercase-key-ignored', { webhooks: false }, true],
    ];
    for (const [messageId, integrations] of cases) {
      await sy.send('/v1/track', own.writeKey, { userId: 'u', event: 'E', messageId, integrations });
    }
    const deliveries = await sy.store.listDeliveries({ sourceId: own.id, limit: 100 });
    const routed = new Set(deliveries.map((d) => d.messageId));
    for (const [messageId, , expected] of cases) assert.equal(routed.has(messageId), expected, messageId);
  });

  it('stores calls to a disabled source as rejected', async () => {
    const own = await sy.createSource('disabled');
    assert.equal((await sy.admin('PATCH', `/sources/${own.id}`, { enabled: false })).status, 200);
    assert.equal((await sy.send('/v1/track', own.writeKey, { userId: 'u', event: 'E' })).status, 200);
    const [message] = await stored(own.id);
    assert.deepEqual([message?.status, message?.reason], ['rejected', 'the source is disabled']);
  });

  it('exposes health, readiness and metrics', async () => {
    assert.equal((await fetch(`${sy.url}/healthz`)).status, 200);
    assert.deepEqual(await (await fetch(`${sy.url}/readyz`)).json(), { status: 'ready' });
    const metrics = await (await fetch(`${sy.url}/metrics`)).text();
    assert.match(metrics, /switchyard_ingest_messages_total\{status="accepted"\} \d+/);
    assert.match(metrics, /switchyard_group_commit_entries_bucket/);
  });
});
