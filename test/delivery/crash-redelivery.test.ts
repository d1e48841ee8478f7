import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

const MESSAGES = 400;

describe('kill -9 while delivering', () => {
  let dataDir: string;
  let receiver: TestReceiver;
  let child: ChildSwitchyard | undefined;

  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-crash-'));
    receiver = await startReceiver();
  });
  after(async () => {
    await child?.kill();
    receiver?.release();
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const env = (): Record<string, string> => ({
    SWITCHYARD_DATA_DIR: dataDir,
    SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
    SWITCHYARD_RETRY_BASE_MS: '20',
    SWITCHYARD_RETRY_MAX_DELAY_MS: '200',
  });
  const call = async (url: string, method: string, route: string, body: unknown, authorization: string): Promise<any> => {
    const response = await fetch(url + route, { method, headers: { authorization, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.ok(response.ok, `${method} ${route}: ${response.status}`);
    return response.json();
  };

  it('delivers every acknowledged message after a restart on the same data, without waiting for leases to expire', async () => {
    child = await startChildSwitchyard(env());
    const admin = `Bearer ${TEST_ADMIN_TOKEN}`;
    const source = await call(child.url, 'POST', '/admin/v1/sources', { name: 'crash' }, admin);
    await call(child.url, 'PUT', `/admin/v1/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } }, admin);

    // The first 100 are answered; then the receiver stops answering, so deliveries are in flight when the server dies.
    receiver.reply = (_request, index) => (index < 100 ? { status: 200 } : { hang: true });
    for (let i = 0; i < MESSAGES; i += 100) {
      const batch = Array.from({ length: 100 }, (_, j) => ({ type: 'track', userId: 'u', event: 'E', messageId: `m-${i + j}` }));
      await call(child.url, 'POST', '/v1/batch', { batch }, basicAuth(source.writeKey));
    }
    await eventually(() => (receiver.hanging() >= 10 ? true : undefined), 20_000, 'deliveries in flight');
    await child.kill('SIGKILL');
    child = undefined;

    receiver.reply = () => ({ status: 200 });
    child = await startChildSwitchyard(env());
    // A lease lasts 35 s here (delivery timeout + 30 s); this deadline is shorter, so leases must have been released.
    await eventually(() => {
      const ids = new Set(receiver.requests.map((r) => JSON.parse(r.body).messageId));
      return ids.size === MESSAGES ? ids : undefined;
    }, 25_000, `all ${MESSAGES} messages at the receiver`);
    const done = await eventually(async () => {
      const listed = await call(child!.url, 'GET', `/admin/v1/deliveries?sourceId=${source.id}&status=succeeded&limit=1000`, undefined, admin);
      return listed.deliveries.length === MESSAGES ? listed.deliveries : undefined;
    }, 25_000, 'every delivery to succeed');
    assert.equal(done.length, MESSAGES);
  });
});
