import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

let sy: TestSwitchyard;
let folder: string;
before(async () => {
  sy = await startTestSwitchyard();
  folder = await mkdtemp(path.join(tmpdir(), 'switchyard-plan-doc-'));
});
after(async () => {
  await sy?.close();
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

it('docs/tracking-plans.md says its CLI commands go through a running server too, and they do', { timeout: 60_000 }, async () => {
  const doc = await readFile(path.join(ROOT, 'docs', 'tracking-plans.md'), 'utf8');
  const section = doc.split(/^## /m).find((part) => part.startsWith('From the CLI\n'));
  assert.ok(section, 'a "## From the CLI" section');
  const [prose, block] = section.split('```sh\n');
  assert.match(prose!, /SWITCHYARD_URL/, 'the section names the server route');
  assert.match(prose!, /--data-dir/, 'and the store route');

  const source = await sy.createSource('plan-doc');
  await writeFile(path.join(folder, 'plan.json'), JSON.stringify({ events: { A: {} } }));
  const env = { SWITCHYARD_URL: sy.url, SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  const commands = block!.split('```')[0]!.split('\n').filter((line) => line.startsWith('npx switchyard '));
  assert.ok(commands.length >= 6, 'the commands the section lists');
  for (const line of commands) {
    const args = line
      .replace(/#.*$/, '')
      .replace(/\[[^\]]*\]/g, '')
      .replace(/>.*$/, '')
      .trim()
      .split(/\s+/)
      .slice(2)
      .map((word) => (word === 'src_…' ? source.id : word));
    const run = await runCli(args, env, undefined, { cwd: folder });
    assert.equal(run.code, 0, `${line}: ${run.stderr}`);
    assert.match(run.stderr, /using server /, line);
  }
});
