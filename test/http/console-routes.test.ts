import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { after, before, describe, it } from 'node:test';
import { consoleRoutes } from '../../src/http/console-routes.js';

describe('serving the console', () => {
  let dir: string;
  let app: FastifyInstance;
  let bare: FastifyInstance;
  const script = `console.log(${JSON.stringify('x'.repeat(2_000))});`;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'switchyard-console-'));
    await writeFile(path.join(dir, 'index.html'), '<!doctype html><title>c</title>');
    await writeFile(path.join(dir, 'app.js'), script);
    await writeFile(path.join(dir, 'notes.txt'), 'not served');
    app = Fastify();
    consoleRoutes(app, dir);
    bare = Fastify();
    consoleRoutes(bare, path.join(dir, 'missing'));
  });
  after(async () => {
    await app.close();
    await bare.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the page at /console and /console/ with a strict Content-Security-Policy', async () => {
    for (const url of ['/console', '/console/']) {
      const page = await app.inject({ url });
      assert.equal(page.statusCode, 200);
      assert.match(page.headers['content-type'] as string, /^text\/html/);
      assert.match(page.headers['content-security-policy'] as string, /default-src 'none'; script-src 'self'/);
      assert.equal(page.headers['x-frame-options'], 'DENY');
      assert.equal(page.body, '<!doctype html><title>c</title>');
    }
  });

  it('compresses as the client accepts, and answers 304 to a matching ETag', async () => {
    const plain = await app.inject({ url: '/console/assets/app.js' });
    assert.equal(plain.body, script);
    assert.equal(plain.headers['content-encoding'], undefined);
    const gzip = await app.inject({ url: '/console/assets/app.js', headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gzip.headers['content-encoding'], 'gzip');
    assert.equal(gunzipSync(gzip.rawPayload).toString(), script);
    const brotli = await app.inject({ url: '/console/assets/app.js', headers: { 'accept-encoding': 'gzip, deflate, br' } });
    assert.equal(brotli.headers['content-encoding'], 'br');
    assert.equal(brotliDecompressSync(brotli.rawPayload).toString(), script);
    assert.ok(brotli.rawPayload.length < script.length / 10);
    const again = await app.inject({ url: '/console/assets/app.js', headers: { 'if-none-match': plain.headers['etag'] as string } });
    assert.equal(again.statusCode, 304);
  });

  it('serves only the built files it knows the type of', async () => {
    assert.equal((await app.inject({ url: '/console/assets/notes.txt' })).statusCode, 404);
    assert.equal((await app.inject({ url: '/console/assets/index.html' })).statusCode, 404);
    assert.equal((await app.inject({ url: '/console/assets/..%2Fpackage.json' })).statusCode, 404);
  });

  it('says how to build the console when it was not built', async () => {
    const page = await bare.inject({ url: '/console' });
    assert.equal(page.statusCode, 503);
    assert.match(page.body, /npm run build/);
  });
});
