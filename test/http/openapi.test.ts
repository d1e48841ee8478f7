import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ERROR_CODES } from '../../src/errors.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const DOCS = path.resolve(import.meta.dirname, '..', '..', '..', 'docs');
const SHIPPED = path.join(DOCS, 'openapi.json');

/** Routes the public contract fixes; the document must have each (it may have more). */
const CONTRACT = [
  'post /v1/identify', 'post /v1/track', 'post /v1/page', 'post /v1/screen', 'post /v1/group', 'post /v1/alias', 'post /v1/batch',
  'post /v1/i', 'post /v1/t', 'post /v1/p', 'post /v1/s', 'post /v1/g', 'post /v1/a', 'post /v1/b', 'post /v1/import', 'post /v1/m',
  'get /healthz', 'get /readyz', 'get /metrics', 'get /admin/v1/openapi.json',
  'post /admin/v1/sources', 'get /admin/v1/sources', 'get /admin/v1/sources/{id}', 'patch /admin/v1/sources/{id}', 'delete /admin/v1/sources/{id}',
  'put /admin/v1/sources/{id}/destinations/webhooks', 'get /admin/v1/sources/{id}/destinations/webhooks',
  'get /admin/v1/sources/{id}/destinations/webhooks/standard-webhooks/secret',
  'post /admin/v1/sources/{id}/destinations/webhooks/standard-webhooks/rotate',
  'get /admin/v1/sources/{id}/debugger', 'get /admin/v1/sources/{id}/debugger/stream',
  'get /admin/v1/deliveries', 'get /admin/v1/deliveries/{id}', 'post /admin/v1/deliveries/{id}/retry', 'post /admin/v1/deliveries/retry',
  'post /admin/v1/regulations', 'get /admin/v1/regulations', 'get /admin/v1/regulations/{id}',
  'post /admin/v1/sources/{id}/replays', 'get /admin/v1/sources/{id}/replays', 'get /admin/v1/replays/{id}', 'post /admin/v1/replays/{id}/cancel',
];

describe('OpenAPI document', () => {
  let sy: TestSwitchyard;
  let doc: any;
  const operations = (): Array<[string, string, any]> =>
    Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([route, methods]) => Object.entries(methods).map(([method, op]) => [method, route, op] as [string, string, any]));

  before(async () => {
    sy = await startTestSwitchyard();
    const response = await fetch(`${sy.url}/admin/v1/openapi.json`);
    assert.equal(response.status, 200, 'served without a token');
    doc = await response.json();
  });
  after(async () => {
    await sy?.close();
  });

  it('is OpenAPI 3.1 with every contract route, each summarized and tagged', () => {
    assert.equal(doc.openapi, '3.1.0');
    const listed = new Set(operations().map(([method, route]) => `${method} ${route}`));
    for (const route of CONTRACT) assert.ok(listed.has(route), `${route} is documented`);
    for (const [method, route, op] of operations()) {
      assert.equal(typeof op.summary, 'string', `${method} ${route} has a summary`);
      assert.ok(Array.isArray(op.tags) && op.tags.length > 0, `${method} ${route} has a tag`);
      if (route.startsWith('/admin/v1/') && route !== '/admin/v1/openapi.json') assert.deepEqual(op.security, [{ adminToken: [] }]);
    }
  });

  it('documents only error codes that exist, with their statuses, all in docs/errors.md', async () => {
    const errorsDoc = await readFile(path.join(DOCS, 'errors.md'), 'utf8');
    let count = 0;
    for (const [method, route, op] of operations()) {
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        for (const code of response['x-error-codes'] ?? []) {
          count++;
          assert.ok(code in ERROR_CODES, `${method} ${route}: ${code} is an error code`);
          assert.equal(String(ERROR_CODES[code as keyof typeof ERROR_CODES]), status, `${method} ${route}: ${code} is a ${status}`);
          assert.ok(errorsDoc.includes(`| \`${code}\` |`), `${code} is in docs/errors.md`);
        }
      }
    }
    assert.ok(count > 50, 'routes name their errors');
  });

  it('lists only routes the server has', async () => {
    for (const [method, route] of operations()) {
      if (route.endsWith('/debugger/stream')) continue; // a stream of a missing source answers 404 not_found like the list
      const url = sy.url + route.replace(/\{[^}]+\}/g, 'x-missing');
      const response = await fetch(url, {
        method: method.toUpperCase(),
        headers: { authorization: 'Bearer wrong-token', 'content-type': 'application/json' },
        body: method === 'get' || method === 'delete' ? undefined : '{}',
      });
      const body = await response.text();
      assert.ok(!body.includes('route_not_found'), `${method} ${route} is a route (${response.status} ${body.slice(0, 100)})`);
    }
  });

  it('validates admin bodies with the same schemas, naming the field', async () => {
    const wrong = await sy.admin('POST', '/sources', { name: 42 });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.error.code, 'invalid_request');
    assert.match(wrong.body.error.message, /name/);
    assert.equal(doc.paths['/admin/v1/sources'].post.requestBody.content['application/json'].schema.properties.name.type, 'string');
  });

  it('is the file the package ships (docs/openapi.json; UPDATE_OPENAPI=1 rewrites it)', async () => {
    const current = `${JSON.stringify(doc, null, 2)}\n`;
    if (process.env['UPDATE_OPENAPI'] === '1') await writeFile(SHIPPED, current);
    assert.equal(await readFile(SHIPPED, 'utf8'), current, 'docs/openapi.json is out of date: run the test with UPDATE_OPENAPI=1');
  });
});
