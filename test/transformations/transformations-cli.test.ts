import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

/** The installed command as a user runs it: plain `node bin/switchyard.js`, which adds --no-node-snapshot by re-running itself. */
function plainCli(args: string[], env: Record<string, string>): Promise<{ code: number; json: any; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, json, stderr });
    });
  });
}

describe('CLI: transformations', () => {
  let sy: TestSwitchyard;
  let dir: string;
  const store = (): string[] => ['--data-dir', sy.dataDir];

  before(async () => {
    sy = await startTestSwitchyard();
    dir = await mkdtemp(path.join(tmpdir(), 'switchyard-cli-tr-'));
  });
  after(async () => {
    await sy?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('creates from a file (through the plain command), versions, tests, reads and deletes', async () => {
    const code = path.join(dir, 'upper.js');
    await writeFile(code, 'export function transformEvent(e) { log("hi"); return { ...e, upper: String(e.event).toUpperCase() }; }');
    const created = await plainCli(['transformations', 'create', 'upper', code, ...store()], {});
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.json.version, 1);
    const id = created.json.id as string;

    const broken = path.join(dir, 'broken.js');
    await writeFile(broken, 'export function transformEvent(e) {\n  return e +;\n}');
    const refused = await runCli(['transformations', 'update', id, broken, ...store()]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /line 2, column 13/);

    const updated = await runCli(['transformations', 'update', id, code, '--name', 'upper2', ...store()]);
    assert.equal(updated.json.version, 2, updated.stderr);
    assert.equal((await runCli(['transformations', 'get', id, '1', ...store()])).json.name, 'upper2');
    assert.equal((await runCli(['transformations', 'list', ...store()])).json.transformations[0].version, 2);

    const events = path.join(dir, 'events.json');
    await writeFile(events, JSON.stringify([{ event: 'signed up' }]));
    const tested = await runCli(['transformations', 'test', code, events, ...store()]);
    // The event as ingest would have stored it: what it lacked is filled, and the result says what.
    assert.deepEqual(Object.keys(tested.json.results[0].filled).sort(), ['messageId', 'receivedAt', 'timestamp']);
    assert.deepEqual(tested.json.results[0].output, { event: 'signed up', ...tested.json.results[0].filled, upper: 'SIGNED UP' });
    assert.deepEqual(tested.json.results[0].logs, ['hi']);

    assert.equal((await runCli(['transformations', 'delete', id, ...store()])).code, 0);
    assert.equal((await runCli(['transformations', 'get', id, ...store()])).code, 1);
  });
});
