import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, waitForDelivery } from '../helpers/webhooks.js';

/** The sandbox's limits for each server here: calls short enough for the tests that time out, a small heap. */
const SANDBOX: Readonly<Record<string, string>> = { 'transform-timeout-ms': '3000', 'transform-memory-mb': '32' };

/**
 * Adversarial tests of function destinations' `fetch` bridge: each attack
 * asserts the refusal (what the host answered, and that nothing reached the
 * target), so removing the defence fails the test.
 */

/** Fetches `properties.url` with `properties.init`; logs what came back; lets errors escape. */
const FETCH_ONE = `
async function onTrack(event) {
  const p = event.properties;
  const res = await fetch(p.url, p.init);
  console.log('status', res.status, 'location', res.headers.get('location'), 'body', (await res.text()).slice(0, 100));
}`;

/**
 * Fetches with the isolate's own checks bypassed: user code may change the
 * classes the bridge uses (URL.prototype.href, Headers' iterator, the
 * method), so what reaches the host is whatever the code wants; only the
 * host's checks stand.
 */
const TAMPERED = `
const realHref = Object.getOwnPropertyDescriptor(URL.prototype, 'href');
const realIterator = Headers.prototype[Symbol.iterator];
async function onTrack(event) {
  const p = event.properties;
  if (p.href !== undefined) Object.defineProperty(URL.prototype, 'href', { get() { return p.href; }, configurable: true, enumerable: true });
  if (p.headers !== undefined) Headers.prototype[Symbol.iterator] = function* () { yield* p.headers; };
  let request;
  try {
    request = fetch(p.url, { method: p.method === undefined ? 'GET' : p.method, body: p.body });
  } finally {
    Object.defineProperty(URL.prototype, 'href', realHref);
    Headers.prototype[Symbol.iterator] = realIterator;
  }
  const res = await request;
  console.log('status', res.status);
}`;

interface TestResult {
  outcome: string;
  error?: string;
  errorType?: string;
  fetches: Array<{ method: string; url: string; status?: number; error?: string }>;
  logs: string[];
}

async function runTest(target: TestSwitchyard, code: string, events: unknown[], settings: Record<string, unknown> = {}): Promise<TestResult[]> {
  const answer = await target.admin('POST', '/functions/test', { code, settings, events });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.results as TestResult[];
}

const track = (properties: Record<string, unknown>) => ({ type: 'track', event: 'Attack', properties });

/** A raw server for answers the test receiver cannot give (endless chunked bodies, trickled bytes). */
async function startRawServer(handler: http.RequestListener): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const sockets = new Set<Socket>();
  const server = http.createServer((request, response) => {
    hits++;
    handler(request, response);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits: () => hits,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('function destinations under attack', () => {
  /** Private receivers refused (the default). */
  let strict: TestSwitchyard;
  /** Private receivers allowed (to reach local test servers), a short delivery timeout. */
  let open: TestSwitchyard;
  let receiver: TestReceiver;
  let second: TestReceiver;

  before(async () => {
    receiver = await startReceiver();
    second = await startReceiver();
    strict = await startTestSwitchyard(SANDBOX);
    open = await startTestSwitchyard({ ...SANDBOX, ...FAST_RETRIES, 'delivery-timeout-ms': '500' });
  });
  after(async () => {
    await strict?.close();
    await open?.close();
    await receiver?.close();
    await second?.close();
  });

  describe('SSRF', () => {
    it('refuses loopback, private and metadata addresses in every spelling, and names that resolve to them', async () => {
      const port = receiver.port;
      const urls = [
        `http://127.0.0.1:${port}/hook`,
        `http://2130706433:${port}/hook`, // decimal
        `http://0x7f.1:${port}/hook`, // hex + short form
        `http://0177.0.0.1:${port}/hook`, // octal
        `http://127.1:${port}/hook`,
        `http://127.0.0.1.:${port}/hook`, // trailing dot
        `http://0.0.0.0:${port}/hook`, // connects to the local host on Linux
        `http://0:${port}/hook`,
        `http://[::1]:${port}/hook`,
        `http://[::ffff:127.0.0.1]:${port}/hook`, // IPv4-mapped
        `http://[::ffff:0:7f00:1]:${port}/hook`, // IPv4-translated
        `http://[64:ff9b::7f00:1]:${port}/hook`, // NAT64
        `http://[2002:7f00:1::]:${port}/hook`, // 6to4
        `http://[::]:${port}/hook`,
        'http://169.254.169.254/latest/meta-data/',
        'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
        'http://10.0.0.1/',
        `http://localhost:${port}/hook`, // names: checked as the connection is made (guardedLookup)
        `http://vm:${port}/hook`, // in /etc/hosts as 127.0.0.1
        `http://127.0.0.1:${strict.port}/admin/v1/sources`, // the admin API itself
      ];
      const results = await runTest(strict, FETCH_ONE, urls.map((url) => track({ url, init: { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } } })));
      results.forEach((result, i) => {
        assert.equal(result.fetches.length, 1, urls[i]);
        assert.match(result.fetches[0]!.error ?? '', /private address refused/, `${urls[i]}: ${JSON.stringify(result)}`);
        assert.equal(result.outcome, 'failed', urls[i]);
        assert.equal(result.errorType, 'TypeError');
      });
      assert.equal(receiver.requests.length, 0, 'nothing reached the loopback receiver');
    });

    it('refuses a zone-scoped IPv6 address, credentials in the URL and the userinfo trick', async () => {
      const results = await runTest(strict, FETCH_ONE, [
        track({ url: 'http://[fe80::1%25eth0]/' }),
        track({ url: `http://127.0.0.1@example.invalid:${receiver.port}/` }),
        track({ url: `http://example.invalid%2f@127.0.0.1:${receiver.port}/` }),
        track({ url: 'https://user:pass@example.invalid/' }),
      ]);
      assert.match(results[0]!.error!, /Invalid URL/);
      assert.equal(results[0]!.fetches.length, 0, 'never reached the host');
      for (const result of results.slice(1)) {
        assert.match(result.fetches[0]!.error!, /credentials in the URL are not sent/);
        assert.equal(result.outcome, 'failed');
      }
      assert.equal(receiver.requests.length, 0);
    });

    it('returns a redirect to a private address to the function and never follows it', async () => {
      const before = second.requests.length;
      receiver.reply = (request) => (request.path.includes('bounce') ? { status: 302, headers: { location: `http://127.0.0.1:${second.port}/internal` } } : { status: 200 });
      try {
        const [result] = await runTest(open, FETCH_ONE, [track({ url: `${receiver.url}/bounce`, init: { redirect: 'follow' } })]);
        assert.equal(result!.outcome, 'delivered', JSON.stringify(result));
        assert.equal(result!.fetches[0]!.status, 302);
        assert.match(result!.logs[0]!, new RegExp(`status 302 location http://127.0.0.1:${second.port}/internal`));
      } finally {
        receiver.reply = () => ({ status: 200 });
      }
      assert.equal(second.requests.length, before, 'the redirect was not followed');
    });
  });

  describe('protocol tricks', () => {
    it('refuses other schemes and relative URLs in the isolate, and again on the host when the isolate is tampered with', async () => {
      const plain = await runTest(strict, FETCH_ONE, [track({ url: 'file:///etc/passwd' }), track({ url: 'data:text/plain,hi' }), track({ url: '//127.0.0.1/' }), track({ url: 'ftp://example.invalid/' })]);
      for (const i of [0, 1, 3]) assert.match(plain[i]!.fetches[0]!.error!, /only http and https URLs can be fetched/, JSON.stringify(plain[i]));
      assert.match(plain[2]!.error!, /Invalid URL/);

      const long = `http://example.invalid/${'a'.repeat(17 * 1024)}`;
      const tampered = await runTest(strict, TAMPERED, [
        track({ url: 'http://example.invalid/', href: 'file:///etc/passwd' }),
        track({ url: 'http://example.invalid/', href: '//127.0.0.1/' }),
        track({ url: 'http://example.invalid/', href: long }),
        track({ url: 'http://example.invalid/', href: 'http://169.254.169.254/' }),
        track({ url: 'http://example.invalid/', href: 'http://u:p@example.invalid/' }),
        track({ url: 'http://example.invalid/', method: 'TRACE' }),
        track({ url: 'http://example.invalid/', method: 'GET / HTTP/1.1\r\nX: y' }),
      ]);
      const errors = tampered.map((r) => r.fetches[0]?.error);
      assert.match(errors[0]!, /only http and https/);
      assert.match(errors[1]!, /invalid URL/);
      assert.match(errors[2]!, /at most 16384 characters/);
      assert.match(errors[3]!, /private address refused/);
      assert.match(errors[4]!, /credentials in the URL/);
      assert.match(errors[5]!, /method must be one of/);
      assert.match(errors[6]!, /method must be one of/);
      for (const result of tampered) assert.equal(result.outcome, 'failed', JSON.stringify(result));
    });

    it('refuses header injection, too many or too large headers, and drops the connection\'s own headers (Host, Transfer-Encoding, Connection)', async () => {
      const before = receiver.requests.length;
      const url = `${receiver.url}/headers`;
      const results = await runTest(open, TAMPERED, [
        track({ url, headers: [['x-a', 'v\r\nx-injected: 1']] }),
        track({ url, headers: [['x-a\r\nx-injected', 'v']] }),
        track({ url, headers: [['x a', 'v']] }),
        track({ url, headers: [['x-a', 'v\u0000']] }),
        track({ url, headers: Array.from({ length: 101 }, (_, i) => [`x-${i}`, 'v']) }),
        track({ url, headers: [['x-a', 'a'.repeat(40 * 1024)], ['x-b', 'b'.repeat(40 * 1024)]] }),
      ]);
      for (const i of [0, 1, 2, 3]) {
        assert.match(results[i]!.fetches[0]!.error!, /^fetch: invalid header (name|value)/, JSON.stringify(results[i]));
        // A request that can never be sent is not a network error: not retried.
        assert.equal(results[i]!.outcome, 'failed');
      }
      assert.match(results[4]!.fetches[0]!.error!, /at most 100 headers/);
      assert.match(results[5]!.fetches[0]!.error!, /larger than 64 KB/);
      assert.equal(receiver.requests.length, before, 'none of them was sent');

      const [sent] = await runTest(open, TAMPERED, [
        track({
          url: `${receiver.url}/own-headers`,
          method: 'POST',
          body: 'hello',
          headers: [['Host', `127.0.0.1:${open.port}`], ['transfer-encoding', 'chunked'], ['connection', 'upgrade'], ['upgrade', 'websocket'], ['content-length', '0'], ['x-kept', 'yes']],
        }),
      ]);
      assert.equal(sent!.outcome, 'delivered', JSON.stringify(sent));
      const got = receiver.requests.find((r) => r.path === '/hook/own-headers');
      assert.ok(got !== undefined);
      assert.equal(got.headers.host, `127.0.0.1:${receiver.port}`);
      assert.equal(got.headers['transfer-encoding'], undefined);
      assert.equal(got.headers.upgrade, undefined);
      assert.equal(got.headers['content-length'], '5');
      assert.equal(got.headers['x-kept'], 'yes');
      assert.equal(got.body, 'hello');
    });
  });

  describe('resource abuse', () => {
    it('counts fetches started in parallel without awaiting: the 11th and 12th are refused and never sent', async () => {
      const code = `
async function onTrack(event, settings) {
  const started = [];
  for (let i = 0; i < 12; i++) started.push(fetch(settings.url + '/parallel/' + i).then((r) => 'ok ' + r.status, (e) => 'error ' + e.message));
  console.log((await Promise.all(started)).join('|'));
}`;
      const before = receiver.requests.filter((r) => r.path.includes('/parallel/')).length;
      const [result] = await runTest(open, code, [track({})], { url: receiver.url });
      const outcomes = result!.logs[0]!.split('|');
      assert.equal(outcomes.filter((o) => o === 'ok 200').length, 10, result!.logs[0]);
      assert.equal(outcomes.filter((o) => /at most 10 requests per call/.test(o)).length, 2);
      assert.equal(result!.fetches.length, 12);
      assert.equal(receiver.requests.filter((r) => r.path.includes('/parallel/')).length - before, 10);
    });

    it('a fetch left running when the call ends is aborted: it never settles into the next call, nor counts against it', async () => {
      const hang = await startRawServer(() => {
        /* never answers */
      });
      try {
        const code = `
async function onTrack(event, settings) {
  if (event.event === 'First') {
    globalThis.leftover = fetch(settings.hang + '/left').then((r) => 'resolved ' + r.url, (e) => 'rejected ' + e.message);
    return;
  }
  const mine = await fetch(settings.url + '/mine');
  const text = await mine.text();
  const state = await Promise.race([globalThis.leftover, Promise.resolve('pending')]);
  console.log('leftover', state, 'mine', mine.status, mine.url);
}`;
        const results = await runTest(open, code, [{ type: 'track', event: 'First' }, { type: 'track', event: 'Second' }], { url: receiver.url, hang: hang.url });
        assert.equal(results[0]!.outcome, 'delivered');
        assert.equal(results[0]!.fetches.length, 1);
        assert.equal(results[0]!.fetches[0]!.url, `${hang.url}/left`);
        assert.equal(results[1]!.outcome, 'delivered', JSON.stringify(results[1]));
        assert.deepEqual(results[1]!.fetches.map((f) => f.url), [`${receiver.url}/mine`], 'only its own fetch');
        assert.deepEqual(results[1]!.logs, [`leftover pending mine 200 ${receiver.url}/mine`]);
      } finally {
        await hang.close();
      }
    });

    it('refuses a response body over 1 MB sent chunked without a length, and a request body over 1 MB in bytes', async () => {
      const endless = await startRawServer((_request, response) => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        const chunk = 'x'.repeat(64 * 1024);
        const write = (): void => {
          while (!response.destroyed && response.write(chunk));
          if (!response.destroyed) response.once('drain', write);
        };
        write();
        response.on('error', () => undefined);
      });
      const before = receiver.requests.length;
      try {
        const code = `
async function onTrack(event, settings) {
  if (event.event === 'Big answer') { const r = await fetch(settings.endless); await r.text(); return; }
  const parts = [];
  for (let i = 0; i < 400 * 1024; i++) parts.push('\u20ac'); // 400 K characters, 1.2 MB as UTF-8
  await fetch(settings.url + '/big', { method: 'POST', body: parts.join('') });
}`;
        const results = await runTest(open, code, [{ type: 'track', event: 'Big answer' }, { type: 'track', event: 'Big request' }], { url: receiver.url, endless: endless.url });
        assert.match(results[0]!.fetches[0]!.error!, /response body is larger than 1 MB/);
        assert.equal(results[0]!.outcome, 'failed');
        assert.match(results[1]!.fetches[0]!.error!, /request body is larger than 1 MB/);
        assert.equal(results[1]!.outcome, 'failed');
      } finally {
        await endless.close();
      }
      assert.equal(receiver.requests.length, before, 'the big request was not sent');
    });

    it('ends a response trickled byte by byte at the delivery timeout (a retriable fetch failure)', async () => {
      const timers = new Set<NodeJS.Timeout>();
      const trickle = await startRawServer((_request, response) => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => response.write('.'), 50);
        timers.add(timer);
        response.on('close', () => clearInterval(timer));
      });
      try {
        const [result] = await runTest(open, FETCH_ONE, [track({ url: `${trickle.url}/slow` })]);
        assert.match(result!.fetches[0]!.error!, /timeout after 500 ms/, JSON.stringify(result));
        assert.equal(result!.outcome, 'retry');
        assert.equal(result!.errorType, 'TypeError');
      } finally {
        for (const timer of timers) clearInterval(timer);
        await trickle.close();
      }
    });

    it('a body read twice rejects; reading answers until memory runs out fails only that call', async () => {
      const code = `
async function onTrack(event, settings) {
  const r = await fetch(settings.url + '/twice');
  await r.text();
  const again = await r.text().then(() => 'read again', (e) => e.message);
  console.log(again);
  if (event.event === 'Hog') { const keep = []; for (;;) keep.push((await new Response('y'.repeat(1 << 20)).text()) + keep.length); }
}`;
      const results = await runTest(open, code, [{ type: 'track', event: 'Twice' }, { type: 'track', event: 'Hog' }, { type: 'track', event: 'After' }], { url: receiver.url });
      assert.deepEqual(results[0]!.logs, ['Body has already been consumed.']);
      assert.equal(results[1]!.outcome, 'failed');
      assert.match(results[1]!.error!, /ran out of memory/);
      assert.equal(results[2]!.outcome, 'delivered', 'the next call runs in a fresh isolate');
    });

    it('past twice its budget a call\'s fetches are refused inside the isolate, without a notice to the host (a loop of them cannot hold the host\'s thread)', async () => {
      // The host answers a notice only in a later entry into the isolate, so
      // a fetch already settled within the entry that made it was refused
      // without one.
      const code = `
async function onTrack(event, settings) {
  const states = [];
  const settled = [];
  for (let i = 0; i < 24; i++) {
    const state = { now: 'pending' };
    settled.push(fetch(settings.url + '/budget/' + i).then(() => (state.now = 'sent'), (e) => (state.now = e.message)));
    states.push(state);
  }
  await null; await null; await null;
  console.log(states.map((s) => s.now).join('|'));
  // Those sent finish before the call ends (a call's fetches still in flight at its end are aborted).
  await Promise.all(settled);
}`;
      const before = receiver.requests.filter((r) => r.path.includes('/budget/')).length;
      const [result] = await runTest(open, code, [track({})], { url: receiver.url });
      const states = result!.logs[0]!.split('|');
      assert.deepEqual(states.slice(0, 20), Array(20).fill('pending'), result!.logs[0]);
      assert.deepEqual(states.slice(20), Array(4).fill('fetch: at most 10 requests per call'), result!.logs[0]);
      assert.equal(result!.fetches.length, 20, 'ten sent, ten refused by the host');
      assert.equal(receiver.requests.filter((r) => r.path.includes('/budget/')).length - before, 10);
    });

    it('fetches made from inside fetch (a Headers iterator the code replaced) count against the same budget', async () => {
      // Each notice still waits for the host's answer at the end of the
      // entry that made it: the pending ones are the notices sent.
      const code = `
async function onTrack(event, settings) {
  const states = [];
  const watch = (promise) => { const state = { now: 'pending' }; promise.then(() => (state.now = 'sent'), (e) => (state.now = e.message)); states.push(state); };
  const iterate = Headers.prototype[Symbol.iterator];
  let depth = 0;
  Headers.prototype[Symbol.iterator] = function () {
    if (depth < 3) { depth++; try { watch(fetch(settings.url + '/nested')); } finally { depth--; } }
    return iterate.call(this);
  };
  for (let i = 0; i < 40; i++) watch(fetch(settings.url + '/nested'));
  await null; await null; await null;
  console.log(states.filter((s) => s.now === 'pending').length, 'of', states.length);
}`;
      const [result] = await runTest(open, code, [track({})], { url: receiver.url });
      assert.equal(result!.logs[0], '20 of 160', JSON.stringify(result));
    });

    it('refuses a body that is not a string or is over 1 MB of characters before it leaves the isolate, and a GET with a body on the host, whatever the code changed', async () => {
      const code = `
async function onTrack(event, settings) {
  const kind = event.properties.kind;
  if (kind === 'object') URLSearchParams.prototype.toString = function () { return { not: 'a string' }; };
  if (kind === 'long') { const big = 'x'.repeat(1024 * 1024 + 1); URLSearchParams.prototype.toString = function () { return big; }; }
  if (kind === 'get') {
    // The isolate's Request upper-cases the method before its GET check.
    String.prototype.toUpperCase = function () { return String(this); };
    await fetch(settings.url + '/get-with-body', { method: 'get', body: 'hidden' });
    return;
  }
  await fetch(settings.url + '/odd-body/' + kind, { method: 'POST', body: new URLSearchParams() });
}`;
      const before = receiver.requests.filter((r) => r.path.includes('/odd-body/') || r.path.includes('/get-with-body')).length;
      const results = await runTest(open, code, [track({ kind: 'object' }), track({ kind: 'long' }), track({ kind: 'get' })], { url: receiver.url });
      // The position is the handler's line that called fetch.
      assert.equal(results[0]!.error, 'fetch: the body could not be read (line 12, column 9)', JSON.stringify(results[0]));
      assert.equal(results[1]!.error, 'fetch: the request body is larger than 1 MB (line 12, column 9)', JSON.stringify(results[1]));
      for (const refused of results.slice(0, 2)) assert.deepEqual(refused.fetches, [], 'refused in the isolate: no request made');
      assert.equal(results[2]!.fetches[0]!.error, 'fetch: a GET request cannot have a body', JSON.stringify(results[2]));
      for (const result of results) assert.equal(result.outcome, 'failed', JSON.stringify(result));
      assert.equal(receiver.requests.filter((r) => r.path.includes('/odd-body/') || r.path.includes('/get-with-body')).length - before, 0);
    });
  });

  describe('isolation', () => {
    it('code that makes JSON.stringify throw (a toJSON on Object.prototype) still ends its call at once, as a failure', async () => {
      const code = `
async function onTrack() {
  Object.prototype.toJSON = function () { throw new Error('no JSON today'); };
  throw new ValidationError('the event is wrong');
}`;
      const [result] = await runTest(open, code, [track({})]);
      // Failed with what stringify threw, not left to run out its time (retried as a timeout).
      assert.equal(result!.outcome, 'failed', JSON.stringify(result));
      assert.match(result!.error!, /no JSON today/);
    });

    it('reaches nothing of the host through the values the bridge returns, stack frames or the globals', async () => {
      const code = `
async function onTrack(event, settings) {
  const seen = {};
  const error = await fetch('file:///etc/passwd').catch((e) => e);
  seen.errorFn = error.constructor.constructor('return typeof process + typeof require + typeof globalThis.startFetch + typeof globalThis.settle')();
  const res = await fetch(settings.url + '/iso');
  seen.responseFn = res.constructor.constructor('return typeof process')();
  seen.headersProto = Object.getPrototypeOf(res.headers) === Headers.prototype;
  seen.urlFn = new URL('http://a/').constructor.constructor('return typeof process')();
  const frames = [];
  Error.prepareStackTrace = (e, callSites) => callSites;
  try { new URL('::not a url::'); } catch (e) { for (const site of e.stack) frames.push([site.getFileName(), typeof site.getFunction(), typeof site.getThis()]); }
  Error.prepareStackTrace = undefined;
  seen.hostFrames = frames.filter((f) => f[0] !== 'function.js').map((f) => f.join(':'));
  seen.globals = Object.getOwnPropertyNames(globalThis).filter((n) => /^(fetch|startFetch|settle|invoke|parseUrl|process|require|module|Buffer|ivm|_.*)$/i.test(n));
  console.log(JSON.stringify(seen));
}`;
      const [result] = await runTest(open, code, [track({})], { url: receiver.url, apiKey: 'sk_iso_secret' });
      assert.equal(result!.outcome, 'delivered', JSON.stringify(result));
      const seen = JSON.parse(result!.logs[0]!);
      assert.equal(seen.errorFn, 'undefinedundefinedundefinedundefined');
      assert.equal(seen.responseFn, 'undefined');
      assert.equal(seen.urlFn, 'undefined');
      assert.equal(seen.headersProto, true);
      // The bridge's own frames (strict code) give neither their function nor their `this`.
      for (const frame of seen.hostFrames) assert.match(frame, /:undefined:undefined$/, frame);
      assert.deepEqual(seen.globals, ['fetch']);
    });

    it('keys like __proto__ in settings, events, results and fetch answers pollute nothing on the host', async () => {
      receiver.reply = (request) => (request.path.includes('proto') ? { status: 200, headers: { 'content-type': 'application/json' }, body: '{"__proto__":{"polluted":true}}' } : { status: 200 });
      try {
        const code = `
async function onTrack(event, settings) {
  const res = await fetch(settings.url + '/proto', { headers: [['__proto__', 'x'], ['constructor', 'y']] });
  const body = await res.json();
  console.log(JSON.stringify({ __proto__: null, fromAnswer: ({}).polluted === undefined && Object.keys(body).join(','), fromSettings: Object.keys(settings).join(','), fromEvent: Object.keys(event.properties).join(',') }));
  const e = new Error('x');
  e.name = '__proto__';
  throw e;
}`;
        const answer = await open.admin('POST', '/functions/test', JSON.parse('{"code":' + JSON.stringify(code) + ',"settings":{"url":' + JSON.stringify(receiver.url) + ',"constructor":{"prototype":{"polluted":true}}},"events":[{"type":"track","event":"P","properties":{"__proto__":{"polluted":true}}}]}'));
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        const [result] = answer.body.results as TestResult[];
        assert.equal(result!.outcome, 'failed');
        assert.equal(result!.errorType, '__proto__');
        const got = receiver.requests.find((r) => r.path === '/hook/proto');
        assert.equal(got?.headers['constructor'], 'y');
      } finally {
        receiver.reply = () => ({ status: 200 });
      }
      assert.equal(({} as Record<string, unknown>)['polluted'], undefined, 'the host is not polluted');
      assert.equal((Object.prototype as Record<string, unknown>)['polluted'], undefined);
    });
  });

  describe('secrets', () => {
    it('masks secret settings wherever the attempt log shows them: logs, errors, error types and fetched URLs in any spelling', async () => {
      const code = `
async function onTrack(event, settings) {
  console.log(settings);
  console.log('key', settings.apiKey, 'token', settings.authToken);
  try { await fetch(settings.secretWebhookUrl); } catch {}
  try { await fetch('http://10.0.0.1/path/' + settings.authToken + '?k=' + settings.apiKey); } catch {}
  const error = new Error('failed with ' + settings.apiKey);
  error.name = 'Bad' + settings.authToken;
  throw error;
}`;
      const settings = { apiKey: 'sk "live" \\ quoted', authToken: 'tok en<1>', secretWebhookUrl: 'HTTP://10.0.0.1:80/services/T0/B0/HookSecretPath', plain: 'visible' };
      const [result] = await runTest(strict, code, [track({})], settings);
      const shown = JSON.stringify(result);
      assert.match(shown, /visible/);
      for (const leak of ['live', 'HookSecretPath', 'tok en', 'tok%20en', 'en<1>', 'en%3C1%3E']) assert.ok(!shown.includes(leak), `${leak} leaked in ${shown}`);
      assert.equal(result!.errorType, 'Bad********');
      assert.equal(result!.error, 'failed with ******** (line 7, column 17)');
      assert.equal(result!.fetches.length, 2);

      // The same through a real delivery's attempt log.
      const source = await strict.createSource('fn-secrets');
      const created = await strict.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'Leaky', code, settings });
      assert.equal(created.status, 201);
      await strict.send('/v1/track', source.writeKey, { userId: 'u1', event: 'S', properties: {} });
      const delivery = await eventually(async () => (await listDeliveries(strict, source.id, 'failed')).find((d) => d.destination === 'function'));
      const detail = await waitForDelivery(strict, delivery.id, 'failed');
      const logged = JSON.stringify(detail);
      for (const leak of ['live', 'HookSecretPath', 'tok en', 'tok%20en', 'en<1>', 'en%3C1%3E']) assert.ok(!logged.includes(leak), `${leak} leaked in ${logged}`);
      assert.equal(detail.attempts[0].function.errorType, 'Bad********');
    });
  });
});
