import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

let sy: TestSwitchyard;
before(async () => {
  sy = await startTestSwitchyard();
});
after(async () => {
  await sy?.close();
});

it('switchyard tracking-plans schema / draft / violations read what the server observed', { timeout: 60_000 }, async () => {
  const source = await sy.createSource('cli-observed');
  const store = ['--data-dir', sy.dataDir];
  await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Viewed', properties: { id: 7 } });

  const schema = await runCli(['tracking-plans', 'schema', source.id, ...store]);
  assert.equal(schema.code, 0, schema.stderr);
  assert.deepEqual(schema.json.events.map((e: { event: string; count: number }) => [e.event, e.count]), [['Viewed', 1]]);
  assert.deepEqual(schema.json.events[0].paths, [{ path: 'id', types: ['integer'], count: 1 }]);
  const empty = await runCli(['tracking-plans', 'schema', source.id, '--since', '2001-01-01T00:00:00Z', '--until', '2001-01-02T00:00:00Z', ...store]);
  assert.deepEqual(empty.json.events, []);

  const draft = await runCli(['tracking-plans', 'draft', source.id, ...store]);
  assert.equal(draft.code, 0, draft.stderr);
  assert.equal(draft.json.events.Viewed.properties.properties.id.type, 'number', 'a number seen only whole is drafted as number');
  const set = await runCli(['tracking-plans', 'set', source.id, '--file', '-', ...store], {}, JSON.stringify(draft.json));
  assert.equal(set.code, 0, set.stderr);

  // The server takes the plan within its config poll: send until a violation is counted.
  let counted: { json: any } | undefined;
  for (let i = 0; i < 60 && counted === undefined; i++) {
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Viewed', properties: { id: 'seven' } });
    const violations = await runCli(['tracking-plans', 'violations', source.id, ...store]);
    assert.equal(violations.code, 0, violations.stderr);
    if (violations.json.violations.length > 0) counted = violations;
    else await new Promise((resolve) => setTimeout(resolve, 250));
  }
  assert.ok(counted !== undefined, 'a violation was counted');
  assert.equal(counted.json.violations[0].type, 'Datatype-Mismatch');
  assert.equal(counted.json.violations[0].event, 'Viewed');
  assert.equal((await runCli(['tracking-plans', 'violations', source.id, '--since', 'soon', ...store])).code, 1);
});

it('switchyard tracking-plans schema pages: --limit and --cursor, a note on stderr when cut, --all for every page', { timeout: 60_000 }, async () => {
  const source = await sy.createSource('cli-paged');
  const store = ['--data-dir', sy.dataDir];
  const batch = [3, 2, 1].flatMap((times, i) => Array.from({ length: times }, () => ({ type: 'track', userId: 'u', event: `E${i}`, properties: { i } })));
  assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);

  const first = await runCli(['tracking-plans', 'schema', source.id, '--limit', '2', ...store]);
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(first.json.events.map((e: { event: string }) => e.event), ['E0', 'E1']);
  assert.equal(typeof first.json.cursor, 'string');
  assert.match(first.stderr, new RegExp(`--cursor ${first.json.cursor}`));
  const next = await runCli(['tracking-plans', 'schema', source.id, '--limit', '2', '--cursor', first.json.cursor, ...store]);
  assert.deepEqual(next.json.events.map((e: { event: string }) => e.event), ['E2']);
  assert.equal(next.json.cursor, undefined);
  assert.doesNotMatch(next.stderr, /--cursor/);

  const all = await runCli(['tracking-plans', 'schema', source.id, '--all', '--limit', '1', ...store]);
  assert.equal(all.code, 0, all.stderr);
  assert.deepEqual(all.json.events.map((e: { event: string; count: number }) => [e.event, e.count]), [['E0', 3], ['E1', 2], ['E2', 1]]);
  assert.equal(all.json.cursor, undefined);
  assert.equal(all.json.truncated.events, false);
  assert.equal((await runCli(['tracking-plans', 'schema', source.id, '--cursor', 'nope!', ...store])).code, 1);
});
