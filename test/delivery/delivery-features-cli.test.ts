import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

describe('CLI: filters, Standard Webhooks secrets and replays', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let source: { id: string; writeKey: string };
  const store = (): string[] => ['--data-dir', sy.dataDir];

  before(async () => {
    receiver = await startReceiver();
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    source = await sy.createSource('cli-features');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: receiver.url }], sharedSecret: 'kept-secret', standardWebhooks: {} },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('sets filters from a file, keeping the secrets', async () => {
    const file = path.join(sy.dataDir, 'filters.json');
    const filters = [{ title: 'no pings', if: { field: 'event', op: '=', value: 'Ping' }, action: 'drop' }];
    await writeFile(file, JSON.stringify(filters));
    const allow = { SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true' };
    const set = await runCli(['webhooks', 'filters', source.id, file, ...store()], allow);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(set.json.filters, filters);
    const stored = (await sy.store.getDestination(source.id, 'webhooks'))!.settings as Record<string, unknown>;
    assert.equal(stored['sharedSecret'], 'kept-secret');
    assert.match(String((stored['standardWebhooks'] as { secret: string }).secret), /^whsec_/);

    const bad = await runCli(['webhooks', 'filters', source.id, '-', ...store()], allow, '[{"title":"x","action":"explode"}]');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /filters\[0\]\.action/);
  });

  it('shows and rotates the Standard Webhooks secret', async () => {
    const shown = await runCli(['webhooks', 'standard-secret', source.id, ...store()]);
    assert.equal(shown.code, 0, shown.stderr);
    const rotated = await runCli(['webhooks', 'rotate-secret', source.id, '--overlap-seconds', '60', ...store()]);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.notEqual(rotated.json.secret, shown.json.secret);
    assert.ok(Date.parse(rotated.json.previousValidUntil) > Date.now());
  });

  it('creates, lists, reads and cancels a replay, which the server sends', async () => {
    const from = new Date().toISOString();
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Bought', messageId: 'cli-replay-1' })).status, 200);
    await eventually(() => receiver.requests.find((r) => JSON.parse(r.body).messageId === 'cli-replay-1'), 10_000, 'the live delivery');
    const to = new Date(Date.now() + 1).toISOString();

    const created = await runCli(['replays', 'create', source.id, '--from', from, '--to', to, '--event', 'Bought', ...store()]);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.json.status, 'running');
    await eventually(() => receiver.requests.find((r) => r.headers['x-switchyard-replay'] === created.json.id), 10_000, 'the replayed POST');

    const listed = await runCli(['replays', 'list', source.id, ...store()]);
    assert.deepEqual(listed.json.replays.map((r: { id: string }) => r.id), [created.json.id]);
    const read = await runCli(['replays', 'get', created.json.id, ...store()]);
    assert.equal(read.json.queued, 1);
    const cancelled = await runCli(['replays', 'cancel', created.json.id, ...store()]);
    assert.equal(cancelled.code, 0, cancelled.stderr);
    assert.ok(['cancelled', 'done'].includes(cancelled.json.status), 'a replay that finished stays done');

    const missing = await runCli(['replays', 'create', source.id, '--from', from, ...store()]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /from and to are required/);
  });
});
