import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { SourceAdmin } from '../../src/admin/source-admin.js';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/serve.js';
import { CLI_BIN, type CliResult, runCli } from '../helpers/cli.js';
import { type FreshDatabase, describePostgres, freshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const TOKEN = { SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN };

/** The source names a `sources list` printed. */
function names(result: CliResult): string[] {
  assert.equal(result.code, 0, result.stderr);
  return (result.json.sources as Array<{ name: string }>).map((source) => source.name).sort();
}

/** The one line saying where the command went: the first line on stderr. */
function usingLine(result: CliResult): string {
  return result.stderr.split('\n')[0]!;
}

/**
 * The reported trap: the server runs on PostgreSQL, and the folder the CLI
 * runs in holds an old SQLite store. `--url` / SWITCHYARD_URL must reach the
 * server, and every command must say where it went.
 */
await describePostgres('CLI --url: admin commands on a running server (cli-url)', () => {
  let db: FreshDatabase;
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let cwd: string;
  const inCwd = (args: string[], env: Record<string, string> = {}, input?: string): Promise<CliResult> => runCli(args, env, input, { cwd });

  before(async () => {
    db = await freshDatabase();
    receiver = await startReceiver();
    sy = await startTestSwitchyard({ 'database-url': db.url, 'allow-private-receivers': 'true' });
    await sy.createSource('on-postgres');
    // A stale store where the CLI runs, at the default ./data: what a command without a URL finds.
    cwd = await mkdtemp(path.join(tmpdir(), 'switchyard-cli-url-'));
    const stale = await openStore(loadConfig({ 'data-dir': path.join(cwd, 'data') }, {}));
    try {
      await new SourceAdmin(stale, Date.now).create({ name: 'stale-sqlite' });
    } finally {
      await stale.close();
    }
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
    await db?.drop();
    if (cwd !== undefined) await rm(cwd, { recursive: true, force: true });
  });

  it('sources list --url lists the server\'s sources, not the SQLite folder\'s, and says it used the server', async () => {
    const listed = await inCwd(['sources', 'list', '--url', sy.url], TOKEN);
    assert.deepEqual(names(listed), ['default', 'on-postgres']);
    assert.equal(usingLine(listed), `switchyard: using server ${sy.url}`);
    assert.doesNotMatch(listed.stderr + listed.stdout, new RegExp(TEST_ADMIN_TOKEN), 'the token is never printed');
  });

  it('SWITCHYARD_URL works the same, and the admin API\'s own address names the same server', async () => {
    const listed = await inCwd(['sources', 'list'], { ...TOKEN, SWITCHYARD_URL: sy.url });
    assert.deepEqual(names(listed), ['default', 'on-postgres']);
    assert.equal(usingLine(listed), `switchyard: using server ${sy.url}`);
    const prefixed = await inCwd(['sources', 'list', '--url', `${sy.url}/admin/v1/`], TOKEN);
    assert.deepEqual(names(prefixed), ['default', 'on-postgres']);
  });

  it('without a URL it says which store it read: the SQLite folder, or PostgreSQL without the password', async () => {
    const sqlite = await inCwd(['sources', 'list']);
    assert.deepEqual(names(sqlite), ['stale-sqlite']);
    assert.equal(usingLine(sqlite), `switchyard: using store ${path.join(cwd, 'data')} (SQLite)`);

    const withPassword = new URL(db.url);
    withPassword.password = 'not-shown-anywhere';
    const postgres = await inCwd(['sources', 'list'], { DATABASE_URL: withPassword.toString() });
    assert.deepEqual(names(postgres), ['default', 'on-postgres']);
    const shown = new URL(db.url);
    assert.equal(usingLine(postgres), `switchyard: using PostgreSQL postgres://${shown.username}@${shown.host}${shown.pathname}`);
    assert.doesNotMatch(postgres.stderr, /not-shown-anywhere/);
  });

  it('a wrong token is refused in one line naming the variable that holds it; a missing one before any request', async () => {
    const wrong = await inCwd(['sources', 'list', '--url', sy.url], { SWITCHYARD_ADMIN_TOKEN: 'not-the-admin-token-000' });
    assert.equal(wrong.code, 1);
    assert.equal(wrong.stdout, '');
    assert.match(wrong.stderr, /refused the admin token \(401\): set SWITCHYARD_ADMIN_TOKEN to the server's admin token/);
    assert.doesNotMatch(wrong.stderr, /not-the-admin-token-000|\n\s+at /);

    const wrongFlag = await inCwd(['sources', 'list', '--url', sy.url, '--token', 'not-the-admin-token-000']);
    assert.match(wrongFlag.stderr, /refused the admin token \(401\): set --token to the server's admin token/);

    const missing = await inCwd(['sources', 'list', '--url', sy.url]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--url needs the server's admin token: set SWITCHYARD_ADMIN_TOKEN/);
  });

  it('an unreachable server is named with its URL, in one line', async () => {
    const closed = createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as { port: number }).port;
    closed.close();
    await once(closed, 'close');
    const url = `http://127.0.0.1:${port}`;
    const result = await inCwd(['deliveries', 'list', '--url', url], TOKEN);
    assert.equal(result.code, 1);
    const lines = result.stderr.trim().split('\n');
    assert.deepEqual(lines, [`switchyard: using server ${url}`, `switchyard: cannot reach the server at ${url} (--url): connection refused (is \`switchyard serve\` running there?)`]);
  });

  it('a URL with credentials is refused without repeating them; --url beside a store flag is refused', async () => {
    const withUser = await inCwd(['sources', 'list', '--url', `http://admin:hunter2-secret@127.0.0.1:${sy.port}`], TOKEN);
    assert.equal(withUser.code, 2);
    assert.match(withUser.stderr, /--url must be an http:\/\/ or https:\/\/ URL with no user, password/);
    assert.doesNotMatch(withUser.stderr, /hunter2/);
    const both = await inCwd(['sources', 'list', '--url', sy.url, '--data-dir', 'data'], TOKEN);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--url names a server and --data-dir a store: give one of them/);
  });

  it('the API\'s 4xx answers are printed with their message and code', async () => {
    const missing = await inCwd(['sources', 'get', 'src_nope', '--url', sy.url], TOKEN);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no source with id "src_nope" \(404 not_found\)/);
    const refused = await inCwd(['webhooks', 'set', 'src_nope', '--url', 'ftp://example.com/x'], { ...TOKEN, SWITCHYARD_URL: sy.url });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /\(40\d [a-z_]+\)$/m);
  });

  it('writes over the URL (sources create, webhooks set), then reads deliveries over it: the same JSON as direct mode', { timeout: 60_000 }, async () => {
    const created = await inCwd(['sources', 'create', 'made-by-cli', '--url', sy.url], TOKEN);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.json.name, 'made-by-cli');
    const onServer = await sy.admin('GET', `/sources/${created.json.id}`);
    assert.equal(onServer.status, 200, 'stored in the server\'s PostgreSQL');
    assert.equal((await inCwd(['sources', 'list'])).json.sources.length, 1, 'the SQLite folder is untouched');

    // In `webhooks set`, --url names the receiver: the server comes from SWITCHYARD_URL.
    const overUrl = { ...TOKEN, SWITCHYARD_URL: sy.url };
    const set = await inCwd(['webhooks', 'set', created.json.id, '--url', receiver.url], overUrl);
    assert.equal(set.code, 0, set.stderr);
    assert.equal(usingLine(set), `switchyard: using server ${sy.url}`);
    assert.deepEqual(set.json.settings.webhooks.map((hook: { url: string }) => hook.url), [receiver.url]);

    await sy.send('/v1/track', created.json.writeKey, { userId: 'u1', event: 'Over The URL' });
    await receiver.waitFor(1);
    const source = ['--source', created.json.id];
    const listed = await eventually(async () => {
      const result = await inCwd(['deliveries', 'list', ...source, '--url', sy.url], TOKEN);
      assert.equal(result.code, 0, result.stderr);
      return result.json.deliveries[0]?.status === 'succeeded' ? result : undefined;
    }, 20_000, 'the delivery to succeed');
    assert.equal(listed.json.deliveries.length, 1);
    const direct = await inCwd(['deliveries', 'list', ...source], { DATABASE_URL: db.url });
    assert.deepEqual(listed.json, direct.json);
    const one = await inCwd(['deliveries', 'get', listed.json.deliveries[0].id], overUrl);
    assert.equal(one.json.attempts.length, 1);
  });

  it('every command group reaches its routes: writes over the URL, reads the same over the URL as on the store', { timeout: 300_000 }, async () => {
    const overUrl = { ...TOKEN, SWITCHYARD_URL: sy.url };
    const onStore = { DATABASE_URL: db.url };
    const write = async (args: string[], input?: string): Promise<any> => {
      const result = await inCwd(args, overUrl, input);
      assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
      assert.equal(usingLine(result), `switchyard: using server ${sy.url}`);
      return result.json;
    };
    /** Both ways, until they print the same (the server's stages may still be working on what was written). */
    const sameBothWays = (args: string[]): Promise<string> =>
      eventually(async () => {
        const [remote, local] = await Promise.all([inCwd(args, overUrl), inCwd(args, onStore)]);
        assert.equal(remote.code, 0, `${args.join(' ')} over the URL: ${remote.stderr}`);
        assert.equal(local.code, 0, `${args.join(' ')} on the store: ${local.stderr}`);
        return remote.stdout === local.stdout && remote.stdout !== '' ? remote.stdout : undefined;
      }, 20_000, `${args.join(' ')} to print the same both ways`);

    const source = await write(['sources', 'create', 'every-group']);
    await write(['sources', 'rename', source.id, 'every-group-renamed']);
    await write(['sources', 'disable', source.id]);
    await write(['sources', 'enable', source.id]);
    await write(['webhooks', 'set', source.id, '--url', receiver.url, '--secret', 'kept-secret-1']);
    const plan = await write(['tracking-plans', 'set', source.id, '--file', '-'], JSON.stringify({ events: { Bought: {} } }));
    assert.equal(plan.version, 1);

    const code = path.join(cwd, 'keep.js');
    await writeFile(code, 'export function transformEvent(e) { return e; }');
    const events = path.join(cwd, 'events.json');
    await writeFile(events, JSON.stringify([{ event: 'x' }]));
    const transformation = await write(['transformations', 'create', 'keep', code]);
    assert.equal((await write(['transformations', 'update', transformation.id, code, '--name', 'keep2'])).version, 2);
    // The event runs as ingest would have stored it: what it lacked is filled, and said so.
    const tested = (await write(['transformations', 'test', code, events])).results[0];
    assert.deepEqual(tested.output, { event: 'x', ...tested.filled });
    assert.deepEqual(Object.keys(tested.filled).sort(), ['messageId', 'receivedAt', 'timestamp']);

    const audienceFile = path.join(cwd, 'audience.json');
    await writeFile(audienceFile, JSON.stringify({ name: 'Bought once', definition: { performed: { event: 'Bought' } } }));
    const audience = await write(['audiences', 'create', audienceFile]);
    await sy.send('/v1/track', source.writeKey, { userId: 'u-every', event: 'Bought' });
    const replay = await write(['replays', 'create', source.id, '--from', '2020-01-01T00:00:00Z', '--to', '2020-01-02T00:00:00Z']);

    for (const args of [
      ['sources', 'get', source.id],
      ['webhooks', 'get', source.id],
      ['tracking-plans', 'get', source.id],
      ['transformations', 'list'],
      ['transformations', 'get', transformation.id],
      ['transformations', 'get', transformation.id, '1'],
      ['audiences', 'list'],
      ['audiences', 'get', audience.id],
      ['audiences', 'members', audience.id, '--limit', '5'],
      ['computed-traits', 'list'],
      ['profiles', 'get', 'user_id:u-every'],
      ['profiles', 'events', 'user_id:u-every', '--limit', '5'],
      ['replays', 'list', source.id],
      ['replays', 'get', replay.id],
      ['debugger', source.id, '--limit', '5'],
      ['deliveries', 'list', '--source', source.id, '--limit', '5'],
    ]) {
      await sameBothWays(args);
    }

    await write(['replays', 'cancel', replay.id]);
    assert.deepEqual(await write(['audiences', 'delete', audience.id]), { deleted: audience.id });
    assert.deepEqual(await write(['transformations', 'delete', transformation.id]), { deleted: transformation.id });
    assert.deepEqual(await write(['tracking-plans', 'delete', source.id]), { deleted: source.id });
    assert.deepEqual(await write(['webhooks', 'delete', source.id]), { deleted: true });
    assert.deepEqual(await write(['sources', 'delete', source.id]), { deleted: source.id });
    assert.equal((await inCwd(['sources', 'get', source.id], onStore)).code, 1, 'deleted in the server\'s store');
  });

  it('debugger --follow over the URL prints messages as they arrive, from the live stream', { timeout: 60_000 }, async () => {
    const source = await sy.createSource('followed');
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Before' });
    const child = spawn(process.execPath, ['--no-node-snapshot', CLI_BIN, 'debugger', source.id, '--follow', '--url', sy.url], {
      cwd,
      env: { PATH: process.env['PATH'] ?? '', ...TOKEN },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await eventually(() => (stdout.includes('"Before"') ? true : undefined), 15_000, 'the recent message');
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'After' });
      await eventually(() => (stdout.includes('"After"') ? true : undefined), 15_000, `the followed message (stderr: ${stderr})`);
      child.kill('SIGINT');
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 0, stderr);
      assert.equal(stderr.trim(), `switchyard: using server ${sy.url}`);
      assert.equal(stdout.trim().split('\n').length, 2, stdout);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
