import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { eventually } from '../helpers/switchyard.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 20_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stderr });
    });
  });
}

describe('the CLI and the first start', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-cli-input-'));
  const children: ChildSwitchyard[] = [];
  after(async () => {
    for (const child of children) await child.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const args of [
    ['audiences', 'create', path.join(dir, 'missing.json')],
    ['computed-traits', 'update', 'ct_x', path.join(dir, 'missing.json')],
    ['webhooks', 'filters', 'src_x', path.join(dir, 'missing.json')],
  ]) {
    it(`says in one line that the file of \`${args.slice(0, 2).join(' ')}\` is missing, exit code 2`, async () => {
      const result = await cli(args, { SWITCHYARD_DATA_DIR: dir });
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stderr.trim(), `switchyard: cannot read ${path.join(dir, 'missing.json')}: no such file`);
    });
  }

  it('says on first start that it listens on every interface, and not when it listens on 127.0.0.1', async () => {
    const open = await startChildSwitchyard({ HOST: '0.0.0.0', SWITCHYARD_DATA_DIR: path.join(dir, 'open') });
    children.push(open);
    await eventually(() => (open.output().includes('listening on every interface (HOST=0.0.0.0)') ? true : undefined), 10_000, 'the log line');
    assert.match(open.output(), /set HOST=127\.0\.0\.1 to listen on this machine only/);

    const local = await startChildSwitchyard({ HOST: '127.0.0.1', SWITCHYARD_DATA_DIR: path.join(dir, 'local') });
    children.push(local);
    await eventually(() => (local.output().includes('Switchyard is ready.') ? true : undefined), 10_000, 'the welcome');
    assert.doesNotMatch(local.output(), /every interface/);
  });
});
