/**
 * A `serve` process whose stage thread (processing, delivery, Engage) dies
 * must never look ready while nothing is processed: it starts the thread
 * again, or ends. The thread is ended from outside the product, by a Node
 * preload in the child process (test/helpers/stage-thread-killer.ts), as a
 * crash (such as the exit code 13 of a thread waiting only for the SQLite
 * write lock) would end it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');
const KILLER = path.resolve(import.meta.dirname, '..', 'helpers', 'stage-thread-killer.js');

async function readyz(url: string): Promise<number | undefined> {
  try {
    return (await fetch(`${url}/readyz`)).status;
  } catch {
    return undefined; // not listening (yet, or any more)
  }
}

/** A track through a new source, then waits until it is stored as a message (processing ran). */
async function processesATrack(url: string): Promise<void> {
  const created = await fetch(`${url}/admin/v1/sources`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `s${Math.random().toString(36).slice(2, 8)}` }),
  });
  assert.equal(created.status, 201);
  const { id, writeKey } = (await created.json()) as { id: string; writeKey: string };
  const tracked = await fetch(`${url}/v1/track`, {
    method: 'POST',
    headers: { authorization: basicAuth(writeKey), 'content-type': 'application/json' },
    body: JSON.stringify({ userId: 'u1', event: 'Stage Thread Test', messageId: 'm-stage-1' }),
  });
  assert.equal(tracked.status, 200);
  await eventually(
    async () => {
      const response = await fetch(`${url}/admin/v1/sources/${id}/debugger`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
      const text = await response.text();
      return response.ok && text.includes('m-stage-1') ? true : undefined;
    },
    20_000,
    'the track to be processed into a message',
  );
}

/** `store()`: the environment that picks the store (none: the embedded one). */
function stageDeathSuite(name: string, store: () => Record<string, string>): void {
  describe(`a stage thread that dies: ${name}`, () => {
    const dirs: string[] = [];
    const dataDir = (): string => {
      const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-stages-'));
      dirs.push(dir);
      return dir;
    };
    after(() => {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    it('at every start takes the process down, never ready meanwhile', { timeout: 60_000 }, async () => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const child = spawn(process.execPath, [BIN, 'serve'], {
        env: {
          PATH: process.env['PATH'] ?? '',
          HOST: '127.0.0.1',
          PORT: String(port),
          SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
          SWITCHYARD_DATA_DIR: dataDir(),
          SWITCHYARD_WORKERS: '1',
          LOG_LEVEL: 'warn',
          ...store(),
          NODE_OPTIONS: `--import ${KILLER}`,
          KILL_STAGE_THREAD_WHEN: 'at-start',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const answers = new Set<number>();
      try {
        await eventually(
          async () => {
            const status = await readyz(url);
            if (status !== undefined) answers.add(status);
            return child.exitCode !== null ? true : undefined;
          },
          40_000,
          'the process to end',
        );
      } finally {
        child.kill('SIGKILL');
      }
      assert.notEqual(child.exitCode, 0, output);
      assert.ok(!answers.has(200), `/readyz answered 200 while no stage thread ran: ${[...answers].join(', ')}`);
      assert.match(output, /stage thread/);
    });

    it('at its first start is started again, and the server then processes', { timeout: 60_000 }, async () => {
      const dir = dataDir();
      const server = await startChildSwitchyard({
        ...store(),
        SWITCHYARD_DATA_DIR: dir,
        SWITCHYARD_WORKERS: '1',
        NODE_OPTIONS: `--import ${KILLER}`,
        KILL_STAGE_THREAD_WHEN: 'at-start',
        KILL_STAGE_THREAD_TIMES: '1',
        KILL_STAGE_THREAD_COUNTER: path.join(dir, 'killed'),
      });
      try {
        await eventually(async () => ((await readyz(server.url)) === 200 ? true : undefined), 20_000, '/readyz to answer 200');
        await processesATrack(server.url);
        assert.match(server.output(), /the stage thread did not start; trying again/);
      } finally {
        await server.kill('SIGKILL');
      }
    });

    it('once running makes /readyz answer 503 until it is started again', { timeout: 60_000 }, async () => {
      const dir = dataDir();
      const server = await startChildSwitchyard({
        ...store(),
        SWITCHYARD_DATA_DIR: dir,
        SWITCHYARD_WORKERS: '1',
        NODE_OPTIONS: `--import ${KILLER}`,
        KILL_STAGE_THREAD_WHEN: 'after-ready',
        KILL_STAGE_THREAD_TIMES: '1',
        KILL_STAGE_THREAD_COUNTER: path.join(dir, 'killed'),
      });
      try {
        // /readyz asked without pause from the start: 200 (ready), then 503 while the thread is dead (the restart
        // comes a second after the exit), then 200 again once it runs.
        const seen: number[] = [];
        await eventually(
          async () => {
            const status = await readyz(server.url);
            if (status !== undefined && status !== seen.at(-1)) seen.push(status);
            return /the stage thread exited; starting it again/.test(server.output()) && seen.includes(503) && seen.at(-1) === 200 ? true : undefined;
          },
          30_000,
          'the stage thread to die and start again',
        );
        assert.ok(seen.includes(503) && seen.at(-1) === 200, `/readyz answered ${seen.join(' → ')}`);
        await processesATrack(server.url);
      } finally {
        await server.kill('SIGKILL');
      }
    });
  });
}

stageDeathSuite('sqlite', () => ({}));

await describePostgres('a stage thread that dies on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  stageDeathSuite('postgres', () => ({ DATABASE_URL: db.url }));
});
