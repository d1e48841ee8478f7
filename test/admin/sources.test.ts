import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, basicAuth, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const run = promisify(execFile);
const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

describe('admin API: sources', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy.close();
  });

  it('refuses requests without the right bearer token', async () => {
    for (const authorization of [undefined, 'Bearer wrong-token-000000000', `Basic ${Buffer.from('x:').toString('base64')}`]) {
      const response = await fetch(`${sy.url}/admin/v1/sources`, { headers: authorization === undefined ? {} : { authorization } });
      assert.equal(response.status, 401);
      assert.deepEqual(((await response.json()) as any).error.code, 'unauthorized');
    }
  });

  it('says whether the token is missing or wrong', async () => {
    const missing = await fetch(`${sy.url}/admin/v1/sources`);
    assert.match(((await missing.json()) as any).error.message, /send the admin token as "Authorization: Bearer <token>"/);
    const wrong = await fetch(`${sy.url}/admin/v1/sources`, { headers: { authorization: 'Bearer wrong-token-000000000' } });
    assert.equal(((await wrong.json()) as any).error.message, 'the admin token is wrong');
  });

  it('reads a JSON body whatever its Content-Type, and says when it is not JSON', async () => {
    for (const contentType of ['application/x-www-form-urlencoded', 'text/plain', undefined]) {
      const response = await fetch(`${sy.url}/admin/v1/sources`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, ...(contentType !== undefined && { 'content-type': contentType }) },
        body: JSON.stringify({ name: `typed ${contentType ?? 'none'}` }),
      });
      assert.equal(response.status, 201, `${contentType}: ${await response.clone().text()}`);
      assert.equal(((await response.json()) as any).name, `typed ${contentType ?? 'none'}`);
    }
    const notJson = await fetch(`${sy.url}/admin/v1/sources`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: 'name=shop',
    });
    assert.equal(notJson.status, 400);
    assert.deepEqual(((await notJson.json()) as any).error, { code: 'invalid_request', message: 'the body is not valid JSON' });
  });

  it('creates the default source on first start', async () => {
    const { body } = await sy.admin('GET', '/sources');
    assert.ok(body.sources.some((s: any) => s.name === 'default'));
  });

  it('creates, reads, renames, disables and deletes a source', async () => {
    const created = await sy.admin('POST', '/sources', { name: '  Web shop ' });
    assert.equal(created.status, 201);
    assert.equal(created.body.name, 'Web shop');
    assert.match(created.body.writeKey, /^[A-Za-z0-9]{32}$/);
    assert.match(created.body.id, /^src_/);
    assert.equal(created.body.enabled, true);
    assert.ok(!Number.isNaN(Date.parse(created.body.createdAt)));
    const id = created.body.id as string;

    assert.deepEqual((await sy.admin('GET', `/sources/${id}`)).body, created.body);
    const renamed = await sy.admin('PATCH', `/sources/${id}`, { name: 'Shop' });
    assert.equal(renamed.body.name, 'Shop');
    assert.equal((await sy.admin('PATCH', `/sources/${id}`, { enabled: false })).body.enabled, false);

    assert.equal((await sy.admin('DELETE', `/sources/${id}`)).status, 204);
    assert.equal((await sy.admin('GET', `/sources/${id}`)).status, 404);
    const gone = await fetch(`${sy.url}/v1/track`, { method: 'POST', headers: { authorization: basicAuth(created.body.writeKey) }, body: '{"userId":"u","event":"E"}' });
    assert.equal(gone.status, 401, 'a deleted source no longer takes messages');
  });

  it('answers invalid requests with 400 naming the field, unknown ids with 404', async () => {
    const cases: Array<[string, string, unknown, number, RegExp]> = [
      ['POST', '/sources', {}, 400, /name/],
      ['POST', '/sources', { name: '' }, 400, /name/],
      ['POST', '/sources', { name: 'x'.repeat(201) }, 400, /name/],
      ['POST', '/sources', { name: 'ok', colour: 'red' }, 400, /colour/],
      ['POST', '/sources', [1], 400, /object/],
      ['PATCH', '/sources/src_nope', { name: 'x' }, 404, /src_nope/],
      ['PATCH', '/sources/src_nope', {}, 400, /name/],
      ['DELETE', '/sources/src_nope', undefined, 404, /src_nope/],
      ['GET', '/nothing-here', undefined, 404, /no route/],
    ];
    for (const [method, route, body, status, message] of cases) {
      const response = await sy.admin(method, route, body);
      assert.equal(response.status, status, `${method} ${route}`);
      assert.match(response.body.error.message, message, `${method} ${route}`);
    }
    const enabled = await sy.admin('PATCH', `/sources/${(await sy.createSource()).id}`, { enabled: 'yes' });
    assert.deepEqual([enabled.status, enabled.body.error.code], [400, 'invalid_request']);
  });
});

describe('CLI: sources', () => {
  it('manages sources on the store, and a running server sees them within a second', async () => {
    const sy = await startTestSwitchyard();
    try {
      const cli = async (...args: string[]) => {
        const { stdout } = await run(process.execPath, [BIN, ...args, '--data-dir', sy.dataDir], { env: { PATH: process.env['PATH'] } });
        return JSON.parse(stdout);
      };
      const created = await cli('sources', 'create', 'from-cli');
      assert.equal(created.name, 'from-cli');
      assert.ok((await cli('sources', 'list')).sources.some((s: any) => s.id === created.id));
      assert.equal((await cli('sources', 'rename', created.id, 'renamed')).name, 'renamed');
      assert.equal((await cli('sources', 'disable', created.id)).enabled, false);
      assert.equal((await cli('sources', 'enable', created.id)).enabled, true);

      // The server polls the store's config version: the new key works without a restart.
      await eventually(async () => {
        const response = await fetch(`${sy.url}/v1/track`, { method: 'POST', headers: { authorization: basicAuth(created.writeKey) }, body: '{"userId":"u","event":"E"}' });
        return response.status === 200 ? true : undefined;
      }, 5_000, 'the server to know the source made by the CLI');

      await cli('sources', 'delete', created.id);
      await assert.rejects(run(process.execPath, [BIN, 'sources', 'get', created.id, '--data-dir', sy.dataDir]), /no source with id/);
      await assert.rejects(run(process.execPath, [BIN, 'sources', 'frobnicate', '--data-dir', sy.dataDir]), /unknown sources command/);
    } finally {
      await sy.close();
    }
  });
});
