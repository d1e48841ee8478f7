import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { shownPath } from '../../src/domain/shown-path.js';
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
