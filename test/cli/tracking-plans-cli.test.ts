import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

let sy: TestSwitchyard;
before(async () => {
  sy = await startTestSwitchyard();
});
after(async () => {
  await sy?.close();
});

it('switchyard tracking-plans set/get/delete work on the store, and the running server takes the plan', { timeout: 60_000 }, async () => {
  const source = await sy.createSource('cli');
  const store = ['--data-dir', sy.dataDir];
  const plan = JSON.stringify({ events: { A: {} }, controls: { unplannedEvents: 'block' } });
  const set = await runCli(['tracking-plans', 'set', source.id, '--file', '-', ...store], {}, plan);
  assert.equal(set.code, 0, set.stderr);
  assert.equal(set.json.version, 1);
  assert.match(set.json.id, /^tp_/);
  const got = await runCli(['tracking-plans', 'get', source.id, ...store]);
  assert.deepEqual(got.json.controls, { unplannedEvents: 'block', violations: 'flag', unplannedProperties: 'allow' });
  const bad = await runCli(['tracking-plans', 'set', source.id, '--file', '-', ...store], {}, JSON.stringify({ controls: { violations: 'never' } }));
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /controls\.violations/);
  await eventually(async () => {
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'B' });
    const [latest] = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages as { status: string }[];
    return latest?.status === 'blocked' ? true : undefined;
  }, 15_000, 'the server blocking by the plan the CLI set');
  const deleted = await runCli(['tracking-plans', 'delete', source.id, ...store]);
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.equal((await runCli(['tracking-plans', 'get', source.id, ...store])).code, 1);
});
