import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, segmentSignatureMatches, waitForDelivery } from '../helpers/webhooks.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly json: any;
}

/** Runs the CLI as a separate process, as a script would. */
function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

describe('CLI: webhooks and deliveries', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let sourceId: string;
  let writeKey: string;
  const store = (): string[] => ['--data-dir', sy.dataDir];
  const allow = { SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true' };

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    ({ id: sourceId, writeKey } = await sy.createSource('cli'));
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('sets and shows the Webhooks destination, validating like the admin API', async () => {
    const set = await cli(['webhooks', 'set', sourceId, '--url', receiver.url, '--url=http://127.0.0.1:9/second', '--header', 'X-Key=a=b', '--secret', 'cli-secret', ...store()], allow);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(set.json.settings, {
      // X-Key is named like a credential: shown masked, as the secret is.
      webhooks: [{ url: receiver.url, headers: { 'X-Key': '********' } }, { url: 'http://127.0.0.1:9/second', headers: { 'X-Key': '********' } }],
      sharedSecret: '********',
    });
    assert.deepEqual(((await sy.store.getDestination(sourceId, 'webhooks'))!.settings as any).webhooks[0].headers, { 'X-Key': 'a=b' });
    const got = await cli(['webhooks', 'get', sourceId, ...store()]);
    assert.equal(got.code, 0, got.stderr);
    assert.equal(got.json.enabled, true);
    assert.equal(got.json.settings.webhooks.length, 2);

    const privateRefused = await cli(['webhooks', 'set', sourceId, '--url', receiver.url, ...store()]);
    assert.equal(privateRefused.code, 1);
    assert.match(privateRefused.stderr, /127\.0\.0\.1 resolves to 127\.0\.0\.1, a loopback, private/);
    const tooMany = await cli(['webhooks', 'set', sourceId, ...[1, 2, 3, 4, 5, 6].flatMap((n) => ['--url', `${receiver.url}${n}`]), ...store()], allow);
    assert.equal(tooMany.code, 1);
    assert.match(tooMany.stderr, /1 to 5 receivers \(got 6\)/);
    const ftp = await cli(['webhooks', 'set', sourceId, '--url', 'ftp://example.com/', ...store()], allow);
    assert.match(ftp.stderr, /http or https/);
    const badHeader = await cli(['webhooks', 'set', sourceId, '--url', receiver.url, '--header', 'no-equals', ...store()], allow);
    assert.equal(badHeader.code, 2);
    // Without --url the receivers stay as they are (here: the two set above).
    const noUrl = await cli(['webhooks', 'set', sourceId, ...store()], allow);
    assert.equal(noUrl.code, 0, noUrl.stderr);
    assert.equal(noUrl.json.settings.webhooks.length, 2);
    assert.deepEqual(((await sy.store.getDestination(sourceId, 'webhooks'))!.settings as any).webhooks[1].headers, { 'X-Key': 'a=b' }, 'the masked header is kept');
    const unknown = await cli(['webhooks', 'get', 'src_nope', ...store()]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no source/);
  });

  it('keeps the secret and filters when set again without them, and deletes the destination', async () => {
    const { id, writeKey: key } = await sy.createSource('cli-keep');
    const first = await cli(['webhooks', 'set', id, '--url', receiver.url, '--secret', 'kept-secret', ...store()], allow);
    assert.equal(first.code, 0, first.stderr);
    const filtered = await sy.admin('PUT', `/sources/${id}/destinations/webhooks`, {
      settings: { ...first.json.settings },
      filters: [{ title: 'no pings', if: { field: 'event', op: '=', value: 'Ping' }, action: 'drop' }],
    });
    assert.equal(filtered.status, 200, JSON.stringify(filtered.body));
    // Only the receivers change; before, this dropped the shared secret.
    const again = await cli(['webhooks', 'set', id, '--url', receiver.url, ...store()], allow);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.json.settings.sharedSecret, '********');
    assert.equal(again.json.filters.length, 1);
    const before = receiver.requests.length;
    assert.equal((await sy.send('/v1/track', key, { userId: 'u', event: 'Kept', messageId: 'kept-1' })).status, 200);
    await receiver.waitFor(before + 1);
    const posted = receiver.requests.find((r) => JSON.parse(r.body).messageId === 'kept-1');
    assert.ok(posted !== undefined && segmentSignatureMatches(posted, 'kept-secret'), 'signed with the secret set first');

    const removed = await cli(['webhooks', 'delete', id, ...store()]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual(removed.json, { deleted: true });
    assert.equal((await sy.admin('GET', `/sources/${id}/destinations/webhooks`)).status, 404);
    assert.notEqual((await cli(['webhooks', 'delete', id, ...store()])).code, 0, 'deleting twice is an error');
    const noUrl = await cli(['webhooks', 'set', id, ...store()]);
    assert.equal(noUrl.code, 2);
    assert.match(noUrl.stderr, /at least one --url for a new destination/);
  });

  it('attaches a transformation (latest or pinned) and per-user ordering, and detaches it, keeping the rest', async () => {
    const { id, writeKey: key } = await sy.createSource('cli-transform');
    const created = await sy.admin('POST', '/transformations', { name: 'cli-upper', code: 'export function transformEvent(e) { e.event = String(e.event).toUpperCase(); return e; }' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const trf = created.body.id as string;
    const first = await cli(['webhooks', 'set', id, '--url', `${receiver.url}/cli-transform`, '--secret', 'kept', '--transformation', trf, '--ordering', 'user', ...store()], allow);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(first.json.settings.transformation, { id: trf });
    assert.equal(first.json.settings.ordering, 'user');
    // The server sees the CLI's change within its config poll: send until one is delivered (each delivered one is transformed).
    let sent = 0;
    const posted = await eventually(async () => {
      assert.equal((await sy.send('/v1/track', key, { userId: 'u', event: 'shout', messageId: `cli-t-${sent++}` })).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 100));
      return receiver.requests.find((r) => r.path === '/hook/cli-transform');
    }, 30_000, 'a message through the transformation');
    assert.equal(JSON.parse(posted.body).event, 'SHOUT');

    const pinned = await cli(['webhooks', 'set', id, `--transformation=${trf}@1`, ...store()], allow);
    assert.equal(pinned.code, 0, pinned.stderr);
    assert.deepEqual(pinned.json.settings.transformation, { id: trf, version: 1 });
    const unknown = await cli(['webhooks', 'set', id, '--transformation', 'trf_nope', ...store()], allow);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /settings\.transformation: no transformation "trf_nope"/);
    const badOrdering = await cli(['webhooks', 'set', id, '--ordering', 'users', ...store()], allow);
    assert.match(badOrdering.stderr, /settings\.ordering must be/);

    const detached = await cli(['webhooks', 'set', id, '--transformation', 'none', ...store()], allow);
    assert.equal(detached.code, 0, detached.stderr);
    assert.equal(detached.json.settings.transformation, undefined);
    assert.equal(detached.json.settings.ordering, 'user', 'what is not given stays');
    assert.equal(detached.json.settings.sharedSecret, '********');
    assert.equal((await sy.admin('DELETE', `/transformations/${trf}`)).status, 204, 'no destination uses it any more');
  });

  it('keeps a disabled destination disabled when set again without --enabled', async () => {
    const { id } = await sy.createSource('cli-disabled');
    const off = await cli(['webhooks', 'set', id, '--url', receiver.url, '--disabled', ...store()], allow);
    assert.equal(off.code, 0, off.stderr);
    assert.equal(off.json.enabled, false);
    // Changing the secret of a destination paused for maintenance does not turn it back on.
    const secret = await cli(['webhooks', 'set', id, '--secret', 'rotated', ...store()], allow);
    assert.equal(secret.code, 0, secret.stderr);
    assert.equal(secret.json.enabled, false);
    assert.equal((await sy.store.getDestination(id, 'webhooks'))!.enabled, false);
    const on = await cli(['webhooks', 'set', id, '--enabled', ...store()], allow);
    assert.equal(on.code, 0, on.stderr);
    assert.equal(on.json.enabled, true);
    assert.equal((await cli(['webhooks', 'set', id, '--secret', 'again', ...store()], allow)).json.enabled, true, 'and on stays on');
    const both = await cli(['webhooks', 'set', id, '--enabled', '--disabled', ...store()], allow);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--disabled or --enabled, not both/);
  });

  it('removes the destination with DELETE; pending deliveries then fail saying why', async () => {
    const { id } = await sy.createSource('api-delete');
    assert.equal((await sy.admin('PUT', `/sources/${id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } })).status, 200);
    const deleted = await sy.admin('DELETE', `/sources/${id}/destinations/webhooks`);
    assert.equal(deleted.status, 204);
    assert.equal((await sy.admin('DELETE', `/sources/${id}/destinations/webhooks`)).status, 404);
    assert.equal((await sy.admin('GET', `/sources/${id}/destinations/webhooks`)).status, 404);
  });

  it('lists, shows and retries deliveries', async () => {
    const set = await cli(['webhooks', 'set', sourceId, '--url', receiver.url, ...store()], allow);
    assert.equal(set.code, 0, set.stderr);
    receiver.reply = () => ({ status: 404 });
    // The server sees the CLI's change within its config poll; send until a delivery job appears.
    const [delivery] = await eventually(async () => {
      await sy.send('/v1/track', writeKey, { userId: 'u1', event: 'E' });
      const listed = (await sy.admin('GET', `/deliveries?sourceId=${sourceId}`)).body.deliveries;
      return listed.length > 0 ? listed : undefined;
    }, 10_000, 'a delivery job');
    await waitForDelivery(sy, delivery.id, 'failed');

    const listed = await cli(['deliveries', 'list', '--source', sourceId, '--status', 'failed', ...store()]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(listed.json.deliveries.some((d: any) => d.id === delivery.id));
    const shown = await cli(['deliveries', 'get', String(delivery.id), ...store()]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.equal(shown.json.attempts[0].statusCode, 404);

    receiver.reply = () => ({ status: 200 });
    const retried = await cli(['deliveries', 'retry', String(delivery.id), ...store()]);
    assert.deepEqual(retried.json, { requeued: 1 });
    await waitForDelivery(sy, delivery.id, 'succeeded');

    const none = await cli(['deliveries', 'retry-all', '--source', sourceId, '--since', new Date().toISOString(), ...store()]);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(typeof none.json.requeued, 'number');
    const badStatus = await cli(['deliveries', 'list', '--status', 'lost', ...store()]);
    assert.equal(badStatus.code, 1);
    const notFailed = await cli(['deliveries', 'retry', String(delivery.id), ...store()]);
    assert.equal(notFailed.code, 1);
    assert.match(notFailed.stderr, /only failed or pending deliveries/);
  });
});
