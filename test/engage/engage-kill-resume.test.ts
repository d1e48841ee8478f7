/**
 * After `kill -9` of a single-node `serve` (SQLite), the next start takes
 * the Engage lease at once instead of waiting for the dead process's lease
 * to run out (it resumed 16–19 s later). Read from the store: the new
 * process's first lease ends before the dead one's would have run out and
 * been taken afresh. Then a new message is synced as usual.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-store.js';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

/** The Engage lease's length (engage-runner.ts LEASE_MS). */
const LEASE_MS = 15_000;

interface Lease {
  readonly owner: string | null;
  readonly expiresAt: number;
}

describe('Engage after kill -9 on a single node', () => {
  let dataDir: string;
  let receiver: TestReceiver;
  const children: ChildSwitchyard[] = [];

  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-engage-kill-'));
    receiver = await startReceiver();
  });
  after(async () => {
    await Promise.all(children.map((child) => child.kill('SIGKILL')));
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const lease = (): Lease => {
    const db = new Database(path.join(dataDir, SQLITE_FILE), { readonly: true, fileMustExist: true });
    try {
      const row = db.prepare('SELECT lease_owner AS owner, lease_expires_at AS expiresAt FROM engage_state WHERE id = 1').get() as Lease | undefined;
      return row ?? { owner: null, expiresAt: 0 };
    } finally {
      db.close();
    }
  };
  const call = async (node: ChildSwitchyard, method: string, route: string, body: unknown, auth = `Bearer ${TEST_ADMIN_TOKEN}`): Promise<any> => {
    const response = await fetch(`${node.url}${route}`, { method, headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const json = await response.json();
    assert.ok(response.ok, `${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const synced = (userId: string): boolean =>
    receiver.requests.some((r) => {
      const message = JSON.parse(r.body) as { userId?: string; traits?: Record<string, unknown> };
      return message.userId === userId && message.traits?.['buyers'] === true;
    });

  it('resumes at once: the lease of the killed process is freed at start', { timeout: 90_000 }, async () => {
    const env = { SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true', SWITCHYARD_WORKERS: '1' };
    const first = await startChildSwitchyard(env);
    children.push(first);
    const source = await call(first, 'POST', '/admin/v1/sources', { name: 'shop' });
    await call(first, 'PUT', `/admin/v1/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
    await call(first, 'POST', '/admin/v1/audiences', { name: 'Buyers', definition: { performed: { event: 'Order Completed' } }, destinations: [source.id] });
    await call(first, 'POST', '/v1/track', { userId: 'before-kill', event: 'Order Completed' }, basicAuth(source.writeKey));
    await eventually(() => (synced('before-kill') ? true : undefined), 20_000, 'the sync before the kill');

    const dead = lease();
    assert.ok(dead.owner !== null, 'the first process holds the Engage lease');
    await first.kill('SIGKILL');

    const second = await startChildSwitchyard(env);
    children.push(second);
    const taken = await eventually(() => {
      const now = lease();
      return now.owner !== null && now.owner !== dead.owner ? now : undefined;
    }, 30_000, 'the restarted process to take the Engage lease');
    // Taken after the dead lease ran out, it would end at (that moment + LEASE_MS) >= dead.expiresAt + LEASE_MS.
    assert.ok(
      taken.expiresAt < dead.expiresAt + LEASE_MS,
      `the new lease (ends ${taken.expiresAt}) was taken only once the dead one (ended ${dead.expiresAt}) ran out`,
    );

    await call(second, 'POST', '/v1/track', { userId: 'after-kill', event: 'Order Completed' }, basicAuth(source.writeKey));
    await eventually(() => (synced('after-kill') ? true : undefined), 20_000, 'the sync after the restart');
  });
});
