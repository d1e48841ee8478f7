import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { ADMIN_URL, postgresAvailable } from '../helpers/postgres.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

function serve(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'serve'], { env: { PATH: process.env['PATH'] ?? '', HOST: '127.0.0.1', ...env }, timeout: 20_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stderr });
    });
  });
}

/** One line naming the problem, no stack trace. */
function assertOneLine(stderr: string, pattern: RegExp): void {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, stderr);
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(stderr, /\n\s+at /);
}

describe('operational errors of serve', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-operational-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('says which port is in use', async () => {
    const blocker = createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await serve({ PORT: String(port), SWITCHYARD_DATA_DIR: path.join(dir, 'busy') });
      assert.equal(result.code, 1);
      assertOneLine(result.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is in use \\(PORT / --port\\)`));
    } finally {
      blocker.close();
    }
  });

  it('names a data folder it cannot create', async () => {
    const file = path.join(dir, 'a-file');
    writeFileSync(file, 'not a folder');
    const result = await serve({ PORT: '0', SWITCHYARD_DATA_DIR: path.join(file, 'data') });
    assert.equal(result.code, 1);
    assertOneLine(result.stderr, /cannot write .*a-file.* \(SWITCHYARD_DATA_DIR \/ --data-dir is /);
  });

  it('refuses a bad LOG_LEVEL naming the allowed ones', async () => {
    const result = await serve({ PORT: '0', SWITCHYARD_DATA_DIR: path.join(dir, 'log'), LOG_LEVEL: 'loud' });
    assert.equal(result.code, 2);
    assertOneLine(result.stderr, /LOG_LEVEL .*must be one of fatal, error, warn, info, debug, trace, silent, got "loud"/);
  });

  // The README's local default (test/helpers/postgres.ts), as the other PostgreSQL tests: skipped only when it does not answer.
  it('says when the PostgreSQL database does not exist, naming it without the credentials', async (t) => {
    if (!(await postgresAvailable())) {
      if (process.env['REQUIRE_POSTGRES'] === '1') throw new Error(`PostgreSQL not reachable at TEST_DATABASE_URL or the default; REQUIRE_POSTGRES=1 makes this a failure`);
      t.skip('PostgreSQL not reachable');
      return;
    }
    const url = new URL(ADMIN_URL);
    url.pathname = `/switchyard_missing_${process.pid}`;
    url.password = 'not-shown-anywhere';
    const result = await serve({ PORT: '0', DATABASE_URL: url.toString() });
    assert.equal(result.code, 1);
    assertOneLine(result.stderr, new RegExp(`the database "switchyard_missing_${process.pid}" on ${url.host.replace(/\./g, '\\.')} \\(DATABASE_URL\\) does not exist: create it \\(createdb switchyard_missing_${process.pid}\\)`));
    assert.doesNotMatch(result.stderr, /not-shown-anywhere/);
  });
});
