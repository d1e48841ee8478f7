import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

describe('CLI: audiences, computed traits and profiles', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let source: { id: string; writeKey: string };
  const store = (): string[] => ['--data-dir', sy.dataDir];

  before(async () => {
    receiver = await startReceiver();
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    source = await sy.createSource('cli-engage');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('creates an audience from a file that the server then syncs, lists members, shows a profile, deletes it', { timeout: 60_000 }, async () => {
    const file = path.join(sy.dataDir, 'audience.json');
    await writeFile(file, JSON.stringify({ name: 'Signed up', definition: { performed: { event: 'Signed Up' } }, destinations: [source.id] }));
    const created = await runCli(['audiences', 'create', file, ...store()]);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.json.key, 'signed_up');
    const id = created.json.id as string;

    await sy.send('/v1/track', source.writeKey, { userId: 'cli-user', event: 'Signed Up' });
    await eventually(() => receiver.requests.find((r) => JSON.parse(r.body).traits?.signed_up === true), 15_000, 'the sync');

    const members = await runCli(['audiences', 'members', id, '--limit', '10', ...store()]);
    assert.equal(members.code, 0, members.stderr);
    assert.deepEqual(members.json.members.map((m: { userId: string }) => m.userId), ['cli-user']);
    const listed = await runCli(['audiences', 'list', ...store()]);
    assert.deepEqual(listed.json.audiences.map((a: { key: string; size: number }) => [a.key, a.size]), [['signed_up', 1]]);
    const profile = await runCli(['profiles', 'get', 'user_id:cli-user', ...store()]);
    assert.equal(profile.code, 0, profile.stderr);
    assert.deepEqual(profile.json.audiences, ['signed_up']);
    const missing = await runCli(['profiles', 'get', 'user_id:nobody', ...store()]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /profile_not_found|no profile/);
    const bad = path.join(sy.dataDir, 'bad.json');
    await writeFile(bad, JSON.stringify({ name: 'Bad', definition: { type: 'event_counter' } }));
    const invalid = await runCli(['computed-traits', 'create', bad, ...store()]);
    assert.notEqual(invalid.code, 0);
    assert.match(invalid.stderr, /definition\.event/);
    // Refused before anything walks it recursively (it overflowed the stack).
    const deep = path.join(sy.dataDir, 'deep.json');
    await writeFile(deep, `{"name":"Deep","definition":{"trait":{"key":"plan","op":"=","value":${'['.repeat(50_000)}${']'.repeat(50_000)}}}}`);
    const tooDeep = await runCli(['audiences', 'create', deep, ...store()]);
    assert.notEqual(tooDeep.code, 0);
    assert.match(tooDeep.stderr, /definition\.trait\.value\[0\]\S* nests deeper than 64 levels/);
    const deleted = await runCli(['audiences', 'delete', id, ...store()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.deepEqual((await runCli(['audiences', 'list', ...store()])).json.audiences, []);
  });
});
