/**
 * A `serve` process whose stage thread (processing, delivery, Engage) dies
 * must never look ready while nothing is processed: it starts the thread
 * again, or ends. The thread is ended from outside the product, by a Node
 * preload in the child process (test/helpers/stage-thread-killer.ts), as a
 * crash (such as the exit code 13 of a thread waiting only for the SQLite
 * write lock) would end it.
 *
 * `/readyz` is asked in a state the test holds, not inside the product's
 * one-second pause before a restart: a second preload (written out by
 * {@link holdStageThread}) keeps a later stage thread from starting until the
 * test opens a gate. While it waits, no stage thread runs, whatever the
 * machine's speed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

const KILLER = path.resolve(import.meta.dirname, '..', 'helpers', 'stage-thread-killer.js');

/**
 * A Node preload for the child's worker threads (the stage thread is its only
 * one): it counts the starts in `HOLD_STAGE_THREAD_STARTS` and, from start
 * number `HOLD_STAGE_THREAD_FROM` on, marks `<starts>.held` and waits, before
 * any of the product's code runs in that thread, until the file
 * `HOLD_STAGE_THREAD_GATE` exists. Loaded before the killer, so a thread the
 * killer ends at start ends only once the gate is open.
 */
const HOLD_PRELOAD = `
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

const gate = process.env.HOLD_STAGE_THREAD_GATE;
const starts = process.env.HOLD_STAGE_THREAD_STARTS;
const from = Number(process.env.HOLD_STAGE_THREAD_FROM);
if (!isMainThread && gate !== undefined && starts !== undefined) {
  appendFileSync(starts, 'x');
  if (readFileSync(starts, 'utf8').length >= from && !existsSync(gate)) {
    appendFileSync(starts + '.held', 'x');
    while (!existsSync(gate)) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
`;

interface Hold {
  /** The child's NODE_OPTIONS and settings: this preload, then the killer. */
  readonly env: Record<string, string>;
  /** Whether a stage thread start is waiting at the gate (or did). */
  held(): boolean;
  /** Stage thread starts so far. */
  starts(): number;
  /** Lets the waiting start (and every later one) go on. */
  open(): void;
}

/** Holds stage thread start number `from` (1: the first) and later ones until {@link Hold.open}; files go in `dir`. */
function holdStageThread(dir: string, from: number): Hold {
  const preload = path.join(dir, 'hold-stage-thread.mjs');
  writeFileSync(preload, HOLD_PRELOAD);
  const starts = path.join(dir, 'starts');
  const gate = path.join(dir, 'gate');
  return {
    env: {
      NODE_OPTIONS: `--import ${preload} --import ${KILLER}`,
      HOLD_STAGE_THREAD_GATE: gate,
      HOLD_STAGE_THREAD_STARTS: starts,
      HOLD_STAGE_THREAD_FROM: String(from),
    },
    held: () => existsSync(`${starts}.held`),
    starts: () => (existsSync(starts) ? readFileSync(starts, 'utf8').length : 0),
    open: () => writeFileSync(gate, ''),
  };
}

interface Readiness {
  readonly status: number;
  readonly reason?: string;
}

async function readyz(url: string): Promise<Readiness | undefined> {
  try {
    const response = await fetch(`${url}/readyz`);
    const body = (await response.json().catch(() => ({}))) as { reason?: string };
    return { status: response.status, ...(body.reason !== undefined && { reason: body.reason }) };
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

const NOT_RUNNING: Readiness = { status: 503, reason: 'processing not running' };

/** `store()`: the environment that picks the store (none: the embedded one). */
function stageDeathSuite(name: string, store: () => Record<string, string>): void {
  describe(`a stage thread that dies: ${name}`, () => {
    const dirs: string[] = [];
    const tempDir = (): string => {
      const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-stages-'));
      dirs.push(dir);
      return dir;
    };
    after(() => {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    /** A server whose stage thread is ended `when` (the first time only, or at every start), and whose second start waits at the gate. */
    const startKilled = async (when: 'at-start' | 'after-ready', times: 'once' | 'every time') => {
      const control = tempDir();
      const hold = holdStageThread(control, 2);
      const server = await startChildSwitchyard({
        ...store(),
        SWITCHYARD_DATA_DIR: tempDir(),
        SWITCHYARD_WORKERS: '1',
        ...hold.env,
        KILL_STAGE_THREAD_WHEN: when,
        ...(times === 'once' && { KILL_STAGE_THREAD_TIMES: '1' }),
        KILL_STAGE_THREAD_COUNTER: path.join(control, 'killed'),
      });
      return { hold, server };
    };

    it('at every start takes the process down, never ready meanwhile', { timeout: 60_000 }, async () => {
      // The first start ends at once; the second waits at the gate (the process is listening, no thread runs), then ends too.
      const { hold, server } = await startKilled('at-start', 'every time');
      const answers = new Set<number>();
      const ask = async (): Promise<Readiness | undefined> => {
        const answer = await readyz(server.url);
        if (answer !== undefined) answers.add(answer.status);
        return answer;
      };
      try {
        await eventually(
          async () => {
            await ask();
            return hold.held() ? true : undefined;
          },
          20_000,
          'the stage thread to be started a second time',
        );
        assert.deepEqual(await ask(), NOT_RUNNING, 'while no stage thread has started');
        assert.equal(server.process.exitCode, null, 'the process waits for its second start');
        hold.open();
        await eventually(
          async () => {
            await ask();
            return server.process.exitCode !== null ? true : undefined;
          },
          40_000,
          'the process to end',
        );
      } finally {
        await server.kill('SIGKILL');
      }
      assert.notEqual(server.process.exitCode, 0, server.output());
      assert.ok(hold.starts() >= 2, `tried again before giving up: ${hold.starts()} start(s)`);
      assert.ok(!answers.has(200), `/readyz answered 200 while no stage thread ran: ${[...answers].join(', ')}`);
      assert.match(server.output(), /stage thread/);
    });

    it('at its first start is started again, and the server then processes', { timeout: 60_000 }, async () => {
      const { hold, server } = await startKilled('at-start', 'once');
      try {
        await eventually(() => (hold.held() ? true : undefined), 20_000, 'the stage thread to be started a second time');
        assert.deepEqual(await readyz(server.url), NOT_RUNNING, 'while the second start waits');
        hold.open();
        await eventually(async () => ((await readyz(server.url))?.status === 200 ? true : undefined), 20_000, '/readyz to answer 200');
        await processesATrack(server.url);
        assert.equal(hold.starts(), 2);
        assert.match(server.output(), /the stage thread did not start; trying again/);
      } finally {
        await server.kill('SIGKILL');
      }
    });

    it('once running makes /readyz answer 503 until it is started again', { timeout: 60_000 }, async () => {
      // The first thread says ready and is ended; the one started in its place waits at the gate.
      const { hold, server } = await startKilled('after-ready', 'once');
      try {
        await eventually(() => (hold.held() ? true : undefined), 20_000, 'the stage thread to die and be started again');
        // Logged only for a thread that had said ready (one that never did is "did not start").
        await eventually(() => (/the stage thread exited; starting it again/.test(server.output()) ? true : undefined), 20_000, 'the death of the running thread to be logged');
        assert.deepEqual(await readyz(server.url), NOT_RUNNING, 'while the thread that ran is dead and the next one not started');
        hold.open();
        await eventually(async () => ((await readyz(server.url))?.status === 200 ? true : undefined), 20_000, '/readyz to answer 200 again');
        await processesATrack(server.url);
        assert.equal(hold.starts(), 2);
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
