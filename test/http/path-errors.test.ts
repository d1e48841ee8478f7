import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import net from 'node:net';
import { originForm, shownPath } from '../../src/domain/shown-path.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

describe('paths the router refuses, and paths no route takes: answered in the API\'s own shape, never echoing a long path whole', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy?.close();
  });

  const get = async (path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers; text: string }> => {
    const response = await fetch(sy.url + path, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, ...headers } });
    const text = await response.text();
    return { status: response.status, body: JSON.parse(text), headers: response.headers, text };
  };

  it('an admin path parameter over 4,096 characters: 414 path_too_long in the admin shape', async () => {
    const long = 'x'.repeat(5_000);
    const answer = await get(`/admin/v1/profiles/user_id:${long}`);
    assert.equal(answer.status, 414);
    assert.equal(answer.body.error.code, 'path_too_long');
    assert.ok(answer.text.length < 600, `the answer repeats ${answer.text.length} characters`);
    // One of exactly 4,096 is read, and found missing.
    const fits = await get(`/admin/v1/sources/${'y'.repeat(4_096)}`);
    assert.equal(fits.status, 404);
    assert.equal(fits.body.error.code, 'not_found');
  });

  it('a path that is not valid percent-encoding: 400 invalid_path, admin shape under /admin/, the Tracking API\'s (with CORS) elsewhere', async () => {
    const admin = await get('/admin/v1/sources/%zz');
    assert.equal(admin.status, 400);
    assert.deepEqual(Object.keys(admin.body), ['error']);
    assert.equal(admin.body.error.code, 'invalid_path');
    const browser = await get('/v1/projects/%zz/settings', { origin: 'https://shop.example' });
    assert.equal(browser.status, 400);
    assert.equal(browser.body.success, false);
    assert.equal(browser.body.code, 'invalid_path');
    assert.ok(browser.headers.get('access-control-allow-origin'), 'a browser can read the answer');
    const long = await get(`/v1/projects/${'k'.repeat(5_000)}/settings`);
    assert.equal(long.status, 414);
    assert.equal(long.body.code, 'path_too_long');
  });

  it('an absolute-form request target (GET http://host/admin/…): the shape of the API its path belongs to', async () => {
    const raw = (target: string): Promise<{ status: number; body: any }> =>
      new Promise((resolve, reject) => {
        const socket = net.connect(Number(new URL(sy.url).port), '127.0.0.1', () =>
          socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_ADMIN_TOKEN}\r\nConnection: close\r\n\r\n`),
        );
        let data = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => (data += chunk));
        socket.on('error', reject);
        socket.on('end', () => resolve({ status: Number(data.split(' ')[1]), body: JSON.parse(data.slice(data.indexOf('\r\n\r\n') + 4)) }));
      });
    const admin = await raw('http://x/admin/v1/sources/%zz');
    assert.equal(admin.status, 400);
    assert.deepEqual(admin.body, { error: { code: 'invalid_path', message: 'the path /admin/v1/sources/%zz is not valid percent-encoding' } });
    const tracking = await raw('http://x/v1/projects/%zz/settings');
    assert.equal(tracking.status, 400);
    assert.equal(tracking.body.code, 'invalid_path');
  });

  it('a long path no route takes is named by its first 200 characters', async () => {
    const path = `/nowhere/${'z'.repeat(8_000)}`;
    const tracking = await get(path);
    assert.equal(tracking.status, 404);
    assert.equal(tracking.body.code, 'route_not_found');
    assert.equal(tracking.body.message, `no route GET ${path.slice(0, 200)}…`);
    const admin = await get(`/admin/v1/nowhere/${'z'.repeat(8_000)}?token=secret`);
    assert.equal(admin.status, 404);
    assert.equal(admin.body.error.code, 'route_not_found');
    assert.ok(admin.body.error.message.length < 250);
    assert.doesNotMatch(admin.body.error.message, /secret/);
  });
});

it('shownPath: no query, at most 200 characters and an ellipsis', () => {
  assert.equal(shownPath('/v1/x?writeKey=abc'), '/v1/x');
  assert.equal(shownPath(`/${'a'.repeat(199)}`), `/${'a'.repeat(199)}`);
  assert.equal(shownPath(`/${'a'.repeat(300)}?q`), `/${'a'.repeat(199)}…`);
});

it('originForm: the path of an absolute-form target, anything else unchanged', () => {
  assert.equal(originForm('http://host:8080/admin/v1/x?y=1'), '/admin/v1/x?y=1');
  assert.equal(originForm('HTTPS://h/v1/t'), '/v1/t');
  assert.equal(originForm('http://host'), '/');
  assert.equal(originForm('http://host?q'), '/?q');
  assert.equal(originForm('/admin/v1/x'), '/admin/v1/x');
  assert.equal(originForm('/v1/http://x/admin/'), '/v1/http://x/admin/');
});
