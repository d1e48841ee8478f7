import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { startChildSwitchyard } from '../helpers/child-switchyard.js';
import { eventually } from '../helpers/switchyard.js';

/** The documented bound, plus a margin: a request this long after the rotation committed must see it. */
const ROTATION_TAKES_EFFECT_MS = 1_100;

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

function run(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', LOG_LEVEL: 'warn', ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

async function status(url: string, token: string): Promise<number> {
  return (await fetch(`${url}/admin/v1/sources`, { headers: { authorization: `Bearer ${token}` } })).status;
}

describe('the generated admin token', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-token-'));
  after(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = { SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_ADMIN_TOKEN: '' };

  it('is not lost when the first start fails, is shown once, and rotates from the CLI', async () => {
    // A busy port: the first start fails after the store exists.
    const blocker = createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const busyPort = (blocker.address() as { port: number }).port;
    const failed = await run(['serve'], { ...env, HOST: '127.0.0.1', PORT: String(busyPort) });
    blocker.close();
    assert.notEqual(failed.code, 0);
    assert.doesNotMatch(failed.stdout, /Admin token/);

    // The next start shows a token (and the default source's id) and marks it shown.
    const first = await startChildSwitchyard(env);
    let token = '';
    try {
      token = await eventually(() => /Admin token[^:]*: (\S+)/.exec(first.output())?.[1], 10_000, 'the token in the banner');
      assert.match(first.output(), /"default" source: id src_\S+, write key \S+/);
      assert.equal(await status(first.url, token), 200);
    } finally {
      await first.kill('SIGTERM');
    }

    const second = await startChildSwitchyard(env);
    try {
      assert.equal(await status(second.url, token), 200, 'the shown token is kept');
      assert.doesNotMatch(second.output(), /Admin token/, 'and not shown again');

      const rotated = await run(['admin-token', 'rotate', '--data-dir', dataDir], {});
      assert.equal(rotated.code, 0, rotated.stderr);
      const fresh = (JSON.parse(rotated.stdout) as { adminToken: string }).adminToken;
      assert.notEqual(fresh, token);
      // "The old token stops working within a second", though only the old
      // one is used meanwhile (a digest cached on a match kept it working).
      await setTimeout(ROTATION_TAKES_EFFECT_MS);
      const old = await fetch(`${second.url}/admin/v1/sources`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(old.status, 401);
      assert.equal(((await old.json()) as { error: { message: string } }).error.message, 'the admin token is wrong');
      assert.equal(await status(second.url, fresh), 200);
    } finally {
      await second.kill('SIGTERM');
    }

    const configured = await run(['admin-token', 'rotate', '--data-dir', dataDir, '--admin-token', 'a-configured-token-0000'], {});
    assert.equal(configured.code, 2);
    assert.match(configured.stderr, /SWITCHYARD_ADMIN_TOKEN \(--admin-token\) is set/);
  });
});
