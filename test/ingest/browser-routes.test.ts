import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const umd = path.join(path.dirname(createRequire(import.meta.url).resolve('@segment/analytics-next/package.json')), 'dist', 'umd');
const origin = 'https://shop.example';
const json = async (response: Response): Promise<any> => response.json();

/** A GET with a Host header of our choosing (fetch does not let one set it). */
function rawGet(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { headers: { host } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

describe('browser routes', () => {
  let sy: TestSwitchyard;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard();
    source = await sy.createSource('website');
  });
  after(async () => {
    await sy.close();
  });

  const stored = async (count: number) =>
    eventually(async () => {
      const messages = await sy.store.listRecentMessages(source.id, 100);
      return messages.length >= count ? messages.map((m) => ({ status: m.status, body: JSON.parse(m.body) })) : undefined;
    }, 10_000, `${count} stored messages`);

  describe('analytics.js settings', () => {
    it('point analytics.js and its metrics back at the server the request reached, with CORS', async () => {
      const response = await fetch(`${sy.url}/v1/projects/${source.writeKey}/settings`, { headers: { origin } });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type')!, /^application\/json/);
      assert.equal(response.headers.get('access-control-allow-origin'), origin);
      const settings = await json(response);
      const segment = settings.integrations['Segment.io'];
      assert.equal(segment.apiKey, source.writeKey);
      assert.equal(segment.apiHost, `127.0.0.1:${sy.port}/v1`);
      assert.equal(segment.protocol, 'http');
      assert.deepEqual(Object.keys(settings.integrations), ['Segment.io'], 'no other destination to load');
      assert.equal(settings.metrics.host, `127.0.0.1:${sy.port}/v1`);
      assert.equal(settings.metrics.sampleRate, 0);
      assert.deepEqual(settings.edgeFunction, {});
      assert.deepEqual(settings.remotePlugins, []);
    });

    it('are cacheable: Cache-Control and an ETag that If-None-Match answers with 304', async () => {
      const first = await fetch(`${sy.url}/v1/projects/${source.writeKey}/settings`);
      const etag = first.headers.get('etag');
      assert.match(first.headers.get('cache-control')!, /max-age=\d+/);
      assert.ok(etag !== null && etag.startsWith('"'));
      const again = await fetch(`${sy.url}/v1/projects/${source.writeKey}/settings`, { headers: { 'if-none-match': etag } });
      assert.equal(again.status, 304);
      assert.equal(await again.text(), '');
      const other = await fetch(`${sy.url}/v1/projects/${source.writeKey}/settings`, { headers: { 'if-none-match': '"something-else"' } });
      assert.equal(other.status, 200);
    });

    it('answer 404 unknown_write_key for a key no source has, not cached', async () => {
      const response = await fetch(`${sy.url}/v1/projects/no-such-key/settings`, { headers: { origin } });
      assert.equal(response.status, 404);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.equal(response.headers.get('access-control-allow-origin'), origin);
      assert.deepEqual(await json(response), { success: false, code: 'unknown_write_key', message: 'unknown write key' });
    });

    it('take the host from the Host header, and refuse a malformed one with 400 invalid_host', async () => {
      const named = await rawGet(`${sy.url}/v1/projects/${source.writeKey}/settings`, 'collect.example.com:8443');
      assert.equal(named.status, 200);
      assert.equal(JSON.parse(named.body).integrations['Segment.io'].apiHost, 'collect.example.com:8443/v1');
      for (const host of ['evil.example/path', 'a b', 'x"y', 'user@host', 'host:99999']) {
        const bad = await rawGet(`${sy.url}/v1/projects/${source.writeKey}/settings`, host);
        assert.equal(bad.status, 400, host);
        assert.equal(JSON.parse(bad.body).code, 'invalid_host', host);
      }
    });
  });

  describe('analytics.js itself', () => {
    it("is the installed package's standalone build, gzipped when asked, cacheable", async () => {
      const expected = await readFile(path.join(umd, 'standalone.js'), 'utf8');
      const plain = await rawGet(`${sy.url}/analytics.js/v1/${source.writeKey}/analytics.min.js`, `127.0.0.1:${sy.port}`);
      assert.equal(plain.status, 200);
      assert.equal(plain.body, expected);

      const gzipped = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        httpRequest(`${sy.url}/analytics.js/v1/${source.writeKey}/analytics.min.js`, { headers: { 'accept-encoding': 'gzip' } }, (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }));
        }).on('error', reject).end();
      });
      assert.equal(gzipped.headers['content-encoding'], 'gzip');
      assert.match(String(gzipped.headers['content-type']), /^application\/javascript/);
      assert.equal(gunzipSync(gzipped.body).toString('utf8'), expected);

      const etag = String(gzipped.headers['etag']);
      const again = await fetch(`${sy.url}/analytics.js/v1/${source.writeKey}/analytics.min.js`, { headers: { 'if-none-match': etag } });
      assert.equal(again.status, 304);
    });

    it('is 404 unknown_write_key for an unknown key', async () => {
      const response = await fetch(`${sy.url}/analytics.js/v1/nope/analytics.min.js`);
      assert.equal(response.status, 404);
      assert.equal((await json(response)).code, 'unknown_write_key');
    });

    it('serves its lazy chunks where it looks for them, and no other file', async () => {
      const { readdir } = await import('node:fs/promises');
      const chunk = (await readdir(umd)).find((name) => /^queryString\.bundle\.[0-9a-f]+\.js$/.test(name))!;
      const response = await fetch(`${sy.url}/analytics-next/bundles/${chunk}`);
      assert.equal(response.status, 200);
      assert.match(response.headers.get('cache-control')!, /immutable/);
      assert.equal(await response.text(), await readFile(path.join(umd, chunk), 'utf8'));
      for (const name of ['standalone.js.map', 'index.js', '..%2Fpackage.json', `${chunk}.map`]) {
        const refused = await fetch(`${sy.url}/analytics-next/bundles/${name}`);
        assert.equal(refused.status, 404, name);
        assert.equal((await json(refused)).code, 'file_not_found', name);
      }
    });
  });

  describe('RudderStack JS SDK', () => {
    it('preflights allow the headers it asks for (from a bounded list), and no others', async () => {
      const asked = 'anonymousid,authorization,content-type,sentat';
      const preflight = await fetch(`${sy.url}/v1/track`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': asked },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers.get('access-control-allow-origin'), origin);
      assert.deepEqual(preflight.headers.get('access-control-allow-headers')!.split(', ').sort(), asked.split(','));

      const retry = await fetch(`${sy.url}/v1/batch`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'rsa-retry-attempt,x-evil,content-type,x-retry-count' },
      });
      assert.deepEqual(retry.headers.get('access-control-allow-headers')!.split(', ').sort(), ['content-type', 'rsa-retry-attempt', 'x-retry-count']);

      const config = await fetch(`${sy.url}/sourceConfig/?writeKey=${source.writeKey}`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
      });
      assert.equal(config.status, 204);
      assert.equal(config.headers.get('access-control-allow-headers'), 'authorization');
      assert.match(config.headers.get('access-control-allow-methods')!, /GET/);
    });

    it('gets a source config for its writeKey, with no destinations and no reporting', async () => {
      const response = await fetch(`${sy.url}/sourceConfig/?p=npm&v=3.34.1&build=modern&writeKey=${source.writeKey}&lockIntegrationsVersion=false`, { headers: { origin } });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('access-control-allow-origin'), origin);
      const config = await json(response);
      assert.equal(config.source.id, source.id);
      assert.equal(config.source.enabled, true);
      assert.deepEqual(config.source.destinations, []);
      assert.equal(config.source.config.statsCollection.errors.enabled, false);
      assert.equal(config.source.config.statsCollection.metrics.enabled, false);

      const byAuth = await fetch(`${sy.url}/sourceConfig`, { headers: { authorization: `Basic ${Buffer.from(`${source.writeKey}:`).toString('base64')}` } });
      assert.equal(byAuth.status, 200);
      const unknown = await fetch(`${sy.url}/sourceConfig/?writeKey=nope`);
      assert.equal(unknown.status, 404);
      assert.equal((await json(unknown)).code, 'unknown_write_key');
    });

    it('beacon batches: text/plain, write key in the query; SentAt and AnonymousId headers fill missing fields', async () => {
      const before = (await sy.store.listRecentMessages(source.id, 100)).length;
      const beacon = await fetch(`${sy.url}/beacon/v1/batch?writeKey=${source.writeKey}`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain;charset=UTF-8', origin },
        body: JSON.stringify({ batch: [{ type: 'track', event: 'Beaconed', anonymousId: 'anon-beacon', messageId: 'beacon-1' }], sentAt: new Date().toISOString() }),
      });
      assert.equal(beacon.status, 200);
      assert.equal(beacon.headers.get('access-control-allow-origin'), origin);
      const noKey = await fetch(`${sy.url}/beacon/v1/batch`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"batch":[]}' });
      assert.equal(noKey.status, 401);
      assert.equal((await json(noKey)).code, 'invalid_write_key');

      const sentAt = new Date(Date.now() - 1_000).toISOString();
      const single = await sy.send('/v1/track', source.writeKey, { event: 'Headed', messageId: 'headed-1' }, {
        anonymousid: Buffer.from('anon-from-header').toString('base64'),
        sentat: sentAt,
      });
      assert.equal(single.status, 200);
      const own = await sy.send('/v1/track', source.writeKey, { event: 'Own', messageId: 'own-1', anonymousId: 'anon-own' }, {
        anonymousid: Buffer.from('anon-from-header').toString('base64'),
      });
      assert.equal(own.status, 200);

      const messages = await stored(before + 3);
      const byId = (id: string) => messages.find((m) => m.body.messageId === id)!;
      assert.equal(byId('beacon-1').status, 'accepted');
      assert.equal(byId('headed-1').status, 'accepted', 'the header gives the call the anonymousId it needs');
      assert.equal(byId('headed-1').body.anonymousId, 'anon-from-header');
      assert.equal(byId('headed-1').body.sentAt, sentAt);
      assert.equal(byId('own-1').body.anonymousId, 'anon-own', "the body's own field wins");
    });
  });
});

describe('browser routes behind a proxy', () => {
  it('use the configured public URL in settings, whatever the Host', async () => {
    const sy = await startTestSwitchyard({ 'public-url': 'https://collect.example.com/events/' });
    try {
      const source = await sy.createSource('proxied');
      const settings = JSON.parse((await rawGet(`${sy.url}/v1/projects/${source.writeKey}/settings`, 'a b')).body);
      assert.equal(settings.integrations['Segment.io'].apiHost, 'collect.example.com/events/v1');
      assert.equal(settings.integrations['Segment.io'].protocol, 'https');
      assert.equal(settings.metrics.protocol, 'https');
    } finally {
      await sy.close();
    }
  });
});
