import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';
import { anonymousIdFromHeader, applyHeaderDefaults, isValidHost, publicBaseUrl, segmentSettings } from '../../src/domain/browser-settings.js';
import { allowedHeadersFor } from '../../src/ingest/cors.js';

describe('browser settings rules', () => {
  it('take host names, addresses and ports as Host, and nothing that could change a URL', () => {
    for (const host of ['collect.example.com', 'localhost:8080', '127.0.0.1:1', '[::1]:8080', 'a-b.example.', 'EXAMPLE.com']) assert.ok(isValidHost(host), host);
    for (const host of ['', 'a/b', 'a b', 'a"b', 'u@h', 'h:0', 'h:65536', 'h:', '-a.example', 'a..b', '[::1', 'x'.repeat(300), 'h:80:80', 'h?x']) {
      assert.ok(!isValidHost(host), host);
    }
    assert.equal(publicBaseUrl(undefined, 'https', 'Collect.Example.com'), 'https://collect.example.com');
    assert.equal(publicBaseUrl(undefined, 'http', 'bad host'), undefined);
    assert.equal(publicBaseUrl('https://p.example/x', 'http', 'bad host'), 'https://p.example/x');
  });

  it('give analytics.js a scheme-less apiHost ending in /v1, as its default api.segment.io/v1', () => {
    const settings = segmentSettings('wk', 'https://p.example/prefix') as any;
    assert.equal(settings.integrations['Segment.io'].apiHost, 'p.example/prefix/v1');
    assert.equal(settings.integrations['Segment.io'].protocol, 'https');
  });

  it("read RudderStack's base64 AnonymousId header, or take a plain value as is", () => {
    assert.equal(anonymousIdFromHeader(Buffer.from('a1b2-c3').toString('base64')), 'a1b2-c3');
    assert.equal(anonymousIdFromHeader('not base64!'), 'not base64!');
    assert.equal(anonymousIdFromHeader(''), undefined);
    assert.equal(anonymousIdFromHeader('x'.repeat(3_000)), undefined);
  });

  it("fill only missing fields from headers; a batch's elements get sentAt, never the anonymous id", () => {
    const call: Record<string, unknown> = { userId: 'u' };
    applyHeaderDefaults(call, 'call', { anonymousId: 'a', sentAt: '2026-01-01T00:00:00.000Z' });
    assert.deepEqual(call, { userId: 'u', anonymousId: 'a', sentAt: '2026-01-01T00:00:00.000Z' });
    const own: Record<string, unknown> = { anonymousId: 'mine', sentAt: 'mine' };
    applyHeaderDefaults(own, 'call', { anonymousId: 'a', sentAt: 'b' });
    assert.deepEqual(own, { anonymousId: 'mine', sentAt: 'mine' });
    const batch = { batch: [{ type: 'track' }, { type: 'page', sentAt: 'own' }] };
    applyHeaderDefaults(batch, 'batch', { anonymousId: 'a', sentAt: 'header' });
    assert.deepEqual(batch, { batch: [{ type: 'track', sentAt: 'header' }, { type: 'page', sentAt: 'own' }] });
  });

  it('allow in a preflight only the listed headers asked for, or all of them when none are named', () => {
    assert.equal(allowedHeadersFor('AnonymousId, SentAt, X-Other'), 'anonymousid, sentat');
    assert.match(allowedHeadersFor(undefined), /anonymousid.*authorization.*content-type.*sentat/);
    assert.match(allowedHeadersFor('a,'.repeat(600)), /authorization/, 'an over-long request is not parsed');
  });

  it('the public URL setting: an http(s) URL without query, user or fragment; trailing slash dropped', () => {
    assert.equal(loadConfig({ 'public-url': 'https://collect.example.com/' }, {}).publicUrl, 'https://collect.example.com');
    assert.equal(loadConfig({}, { SWITCHYARD_PUBLIC_URL: 'http://h:8080/a/' }).publicUrl, 'http://h:8080/a');
    assert.equal(loadConfig({}, {}).publicUrl, undefined);
    for (const bad of ['ftp://h', 'https://u:p@h', 'https://h/?x=1', 'https://h/#f', 'not a url']) {
      assert.throws(() => loadConfig({ 'public-url': bad }, {}), ConfigError, bad);
    }
  });
});
