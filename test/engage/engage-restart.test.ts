import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { loadConfig } from '../../src/config.js';
import { type RunningSwitchyard, startSwitchyard } from '../../src/serve.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

describe('Engage after a restart', () => {
  let dataDir: string;
  let receiver: TestReceiver;

  const start = (): Promise<RunningSwitchyard> =>
    startSwitchyard(
      loadConfig({ port: '0', host: '127.0.0.1', 'data-dir': dataDir, 'admin-token': TEST_ADMIN_TOKEN, 'allow-private-receivers': 'true' }, {}),
      pino({ level: 'silent' }),
    );
  const call = async (node: RunningSwitchyard, method: string, route: string, body?: unknown, auth = `Bearer ${TEST_ADMIN_TOKEN}`): Promise<any> => {
    const response = await fetch(`http://127.0.0.1:${node.port}${route}`, {
      method,
      headers: { authorization: auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return text === '' ? undefined : JSON.parse(text);
  };
  const buyersSynced = (): string[] =>
    receiver.requests
      .map((r) => JSON.parse(r.body) as { userId?: string; traits?: Record<string, unknown> })
      .filter((m) => m.traits?.['buyers'] === true)
      .map((m) => m.userId!)
      .sort();

  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-engage-restart-'));
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('resumes from its cursor: messages stored while it was down are applied once, nothing is synced twice', { timeout: 60_000 }, async () => {
    const first = await start();
    let sourceId: string;
    try {
      const source = await call(first, 'POST', '/admin/v1/sources', { name: 'shop' });
      sourceId = source.id;
      await call(first, 'PUT', `/admin/v1/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      const audience = await call(first, 'POST', '/admin/v1/audiences', { name: 'Buyers', definition: { performed: { event: 'Order Completed' } }, destinations: [source.id] });
      assert.match(audience.id, /^aud_/);
      for (const userId of ['u1', 'u2']) await call(first, 'POST', '/v1/track', { userId, event: 'Order Completed' }, basicAuth(source.writeKey));
      await eventually(() => (buyersSynced().length === 2 ? true : undefined), 10_000, 'the first two syncs');
    } finally {
      await first.close();
    }

    // Stored while no evaluator ran (as after a crash right behind ingest's commit).
    const store = SqliteStore.open({ dataDir, durability: 'process' });
    await store.migrate();
    const cursorBefore = await store.getEngageCursor();
    const at = Date.now();
    await store.appendMessages(
      ['u3', 'u4'].map((userId, i) => ({
        sourceId,
        status: 'accepted' as const,
        type: 'track',
        messageId: `offline-${i}`,
        userId,
        receivedAt: at,
        body: JSON.stringify({ type: 'track', userId, event: 'Order Completed', messageId: `offline-${i}`, timestamp: new Date(at).toISOString() }),
        destinations: [],
      })),
      0,
    );
    await store.close();

    const second = await start();
    try {
      await eventually(() => (buyersSynced().length === 4 ? true : undefined), 10_000, 'the offline messages to sync');
      assert.ok((await second.store.getEngageCursor()) > cursorBefore, 'the cursor moved on');
      // Another message after the restart: still exactly one sync per user.
      const { writeKey } = (await call(second, 'GET', `/admin/v1/sources/${sourceId}`)) as { writeKey: string };
      await call(second, 'POST', '/v1/track', { userId: 'u5', event: 'Order Completed' }, basicAuth(writeKey));
      await eventually(() => (buyersSynced().length === 5 ? true : undefined), 10_000, 'the live sync');
      assert.deepEqual(buyersSynced(), ['u1', 'u2', 'u3', 'u4', 'u5']);
    } finally {
      await second.close();
    }
  });
});
