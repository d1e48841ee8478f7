import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { runCli } from '../helpers/cli.js';
import { TEST_ADMIN_TOKEN } from '../helpers/switchyard.js';
import { DataDirInUseError, lockDataDir } from '../../src/store/sqlite/data-dir-lock.js';

describe('one serve per SQLite data folder', () => {
  let root: string;
  let dataDir: string;
  let first: ChildSwitchyard | undefined;

  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'switchyard-lock-'));
    dataDir = path.join(root, 'data');
  });
  after(async () => {
    await first?.kill();
    await rm(root, { recursive: true, force: true });
  });

  it('refuses a second serve with one line naming the folder and the holder PID, while the CLI keeps working', async () => {
    first = await startChildSwitchyard({ SWITCHYARD_DATA_DIR: dataDir });
    const second = await runCli(['serve'], {
      SWITCHYARD_DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN, LOG_LEVEL: 'warn',
    });
    assert.equal(second.code, 1);
    assert.equal(second.stdout, '', 'nothing started, nothing printed');
    const lines = second.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, second.stderr);
    assert.ok(lines[0]!.includes(dataDir), lines[0]);
    assert.ok(lines[0]!.includes(`PID ${first.process.pid}`), lines[0]);

    const listed = await runCli(['sources', 'list', '--data-dir', dataDir]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(listed.json.sources.map((s: { name: string }) => s.name), ['default']);
    assert.ok((await fetch(`${first.url}/healthz`)).ok, 'the first server is untouched');
  });

  it('lets the next serve take the folder once the holder is killed (the lock dies with the process)', async () => {
    await first!.kill('SIGKILL');
    first = await startChildSwitchyard({ SWITCHYARD_DATA_DIR: dataDir });
    assert.ok((await fetch(`${first.url}/healthz`)).ok);
  });

  it('keeps the data folder and its files private to their owner', () => {
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
    for (const name of ['switchyard.sqlite', 'switchyard.sqlite-wal', 'switchyard.sqlite-shm', 'serve.lock']) {
      const file = path.join(dataDir, name);
      assert.ok(existsSync(file), name);
      assert.equal(statSync(file).mode & 0o777, 0o600, name);
    }
  });
});

describe('lockDataDir', () => {
  it('starts afresh from a damaged lock file, and names the holder to a second taker in the same process', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-lock-'));
    try {
      writeFileSync(path.join(dir, 'serve.lock'), 'not a database, as a crash mid-write could leave it');
      const lock = lockDataDir(dir, 4242);
      assert.throws(() => lockDataDir(dir, 4343), (error: unknown) => error instanceof DataDirInUseError && error.pid === 4242);
      lock.release();
      lockDataDir(dir, 4343).release();
      assert.deepEqual(readdirSync(dir).sort(), ['serve.lock'], 'no journal left behind');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
