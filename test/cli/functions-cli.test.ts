import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const FORWARDER = `
async function onTrack(event, settings) {
  console.log('forwarding', event.event);
  const res = await fetch(settings.url, { method: 'POST', headers: { Authorization: 'Bearer ' + settings.apiKey }, body: JSON.stringify({ name: event.event, via: settings.via }) });
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

let sy: TestSwitchyard;
let receiver: TestReceiver;
let dir: string;
const file = async (name: string, text: string): Promise<string> => {
  const where = path.join(dir, name);
  await writeFile(where, text);
  return where;
};

before(async () => {
  receiver = await startReceiver();
  sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
  dir = await mkdtemp(path.join(tmpdir(), 'switchyard-functions-cli-'));
});
after(async () => {
  await sy?.close();
  await receiver?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

it('switchyard functions create/list/get/update/test/delete work on the store, and the running server delivers through the function', { timeout: 90_000 }, async () => {
  const source = await sy.createSource('functions-cli');
  const store = ['--data-dir', sy.dataDir];
  const env = { SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true' };
  const code = await file('forward.js', FORWARDER);
  const settings = await file('settings.json', JSON.stringify({ url: receiver.url, apiKey: 'sk_cli_secret_1', via: 'cli' }));

  const created = await runCli(['functions', 'create', source.id, 'Forward', code, '--settings', settings, '--max-rps', '50', ...store], env);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.json.id, /^fn_/);
  assert.equal(created.json.version, 1);
  assert.equal(created.json.enabled, true);
  assert.equal(created.json.maxRequestsPerSecond, 50);
  assert.equal(created.json.settings.apiKey, '********');
  const id = created.json.id as string;

  const bad = await runCli(['functions', 'create', source.id, 'Broken', await file('bad.js', 'async function onTrack(e) {\n  return e +;\n}'), ...store]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /line 2, column 13/);
  const usage = await runCli(['functions', 'update', source.id, id, ...store]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /update needs at least one of/);

  const listed = await runCli(['functions', 'list', source.id, ...store]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual((listed.json.functions as Array<{ id: string }>).map((f) => f.id), [id]);

  // The running server routes to it within its config poll: the receiver gets the function's own POST.
  await eventually(async () => {
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Through CLI' });
    return receiver.requests.find((r) => r.body.includes('Through CLI'));
  }, 20_000, 'a track delivered through the function the CLI created');
  const sent = receiver.requests.find((r) => r.body.includes('Through CLI'))!;
  assert.equal(sent.headers.authorization, 'Bearer sk_cli_secret_1');
  assert.deepEqual(JSON.parse(sent.body), { name: 'Through CLI', via: 'cli' });

  // Settings sent back masked keep the secret; a new file of code is version 2; --disable turns it off.
  const masked = await file('masked.json', JSON.stringify({ url: receiver.url, apiKey: '********', via: 'cli-2' }));
  const updated = await runCli(['functions', 'update', source.id, id, '--code', code, '--settings', masked, '--name', 'Forward2', '--disable', '--max-rps', 'none', ...store]);
  assert.equal(updated.code, 0, updated.stderr);
  assert.equal(updated.json.version, 2);
  assert.equal(updated.json.name, 'Forward2');
  assert.equal(updated.json.enabled, false);
  assert.equal(updated.json.maxRequestsPerSecond, undefined);
  const got = await runCli(['functions', 'get', source.id, id, ...store]);
  assert.equal(got.code, 0, got.stderr);
  assert.equal(got.json.code, FORWARDER);
  assert.deepEqual(got.json.settings, { url: receiver.url, apiKey: '********', via: 'cli-2' });
  const stored = await sy.store.getFunctionDestination(id);
  assert.equal(stored?.settings['apiKey'], 'sk_cli_secret_1');

  // A test runs in the CLI's process under its network rules, storing nothing.
  const events = await file('events.json', JSON.stringify([{ type: 'track', event: 'Tested' }, { type: 'page', name: 'Home' }]));
  const before = receiver.requests.length;
  const tested = await runCli(['functions', 'test', code, events, '--settings', settings, ...store], env);
  assert.equal(tested.code, 0, tested.stderr);
  const [track, page] = tested.json.results as Array<{ outcome: string; errorType?: string; fetches: Array<{ method: string; status?: number }>; logs: string[] }>;
  assert.equal(track!.outcome, 'delivered');
  assert.deepEqual(track!.fetches.map((f) => [f.method, f.status]), [['POST', 200]]);
  assert.deepEqual(track!.logs, ['forwarding Tested']);
  assert.equal(page!.outcome, 'failed');
  assert.equal(page!.errorType, 'EventNotSupported');
  assert.equal(receiver.requests.length, before + 1);
  // Without the private-receivers setting, this process refuses the loopback receiver.
  const guarded = await runCli(['functions', 'test', code, events, '--settings', settings, ...store]);
  assert.equal(guarded.code, 0, guarded.stderr);
  assert.match(guarded.json.results[0].fetches[0].error, /private address refused/);
  assert.equal(receiver.requests.length, before + 1);

  const deleted = await runCli(['functions', 'delete', source.id, id, ...store]);
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.deepEqual(deleted.json, { deleted: id });
  assert.equal((await runCli(['functions', 'get', source.id, id, ...store])).code, 1);
});

it('switchyard functions works over --url with the admin token', { timeout: 60_000 }, async () => {
  const source = await sy.createSource('functions-cli-url');
  const server = ['--url', sy.url];
  const env = { SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  const code = await file('forward-url.js', FORWARDER);
  const settings = await file('settings-url.json', JSON.stringify({ url: receiver.url, apiKey: 'sk_cli_secret_2' }));
  const created = await runCli(['functions', 'create', source.id, 'OverHttp', code, '--settings', settings, '--disabled', ...server], env);
  assert.equal(created.code, 0, created.stderr);
  assert.equal(created.json.enabled, false);
  assert.match(created.stderr, new RegExp(sy.url.replace(/[.]/g, '\\.')));
  const listed = await runCli(['functions', 'list', source.id, ...server], env);
  assert.deepEqual((listed.json.functions as Array<{ name: string }>).map((f) => f.name), ['OverHttp']);
  // The server's test runs under the server's rules (private receivers allowed there).
  const events = await file('events-url.json', JSON.stringify([{ type: 'track', event: 'Over HTTP' }]));
  const tested = await runCli(['functions', 'test', code, events, '--settings', settings, ...server], env);
  assert.equal(tested.code, 0, tested.stderr);
  assert.equal(tested.json.results[0].outcome, 'delivered');
  const missing = await runCli(['functions', 'get', source.id, 'fn_nope', ...server], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /404 not_found/);
});
