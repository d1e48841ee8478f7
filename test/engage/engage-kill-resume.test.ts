/**
 * After `kill -9` of a single-node `serve`, the next start takes the Engage
 * lease at once instead of waiting for the dead process's lease to run out
 * (it resumed 16–19 s later).
 *
 * Both stores: the dead lease is pushed an hour ahead right after the kill,
 * so waiting for it to run out would take an hour; the new process must
 * take it and sync a new message within the test's bound. SQLite frees it
 * at start (no other process can hold it: the data folder is locked);
 * PostgreSQL frees a lease whose holder's session is gone.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import Database from 'better-sqlite3';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-store.js';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';


interface Lease {
  readonly owner: string | null;
  readonly expiresAt: number;
}

const call = async (node: ChildSwitchyard, method: string, route: string, body: unknown, auth = `Bearer ${TEST_ADMIN_TOKEN}`): Promise<any> => {
  const response = await fetch(`${node.url}${route}`, { method, headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await response.json();
  assert.ok(response.ok, `${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
  return json;
};

const syncedTo = (receiver: TestReceiver, userId: string): boolean =>
  receiver.requests.some((r) => {
    const message = JSON.parse(r.body) as { userId?: string; traits?: Record<string, unknown> };
    return message.userId === userId && message.traits?.['buyers'] === true;
  });

/** Starts a node, sets up a source with an audience, and waits for a first sync; returns the node and the source. */
async function firstNode(env: Record<string, string>, receiver: TestReceiver, children: ChildSwitchyard[]): Promise<{ node: ChildSwitchyard; writeKey: string }> {
  const node = await startChildSwitchyard(env);
  children.push(node);
  const source = await call(node, 'POST', '/admin/v1/sources', { name: 'shop' });
  await call(node, 'PUT', `/admin/v1/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
  await call(node, 'POST', '/admin/v1/audiences', { name: 'Buyers', definition: { performed: { event: 'Order Completed' } }, destinations: [source.id] });
  await call(node, 'POST', '/v1/track', { userId: 'before-kill', event: 'Order Completed' }, basicAuth(source.writeKey));
  await eventually(() => (syncedTo(receiver, 'before-kill') ? true : undefined), 20_000, 'the sync before the kill');
  return { node, writeKey: source.writeKey as string };
}

describe('Engage after kill -9 on a single node (SQLite)', () => {
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

  it('resumes at once: the lease of the killed process is freed at start', { timeout: 90_000 }, async () => {
    const env = { SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true', SWITCHYARD_WORKERS: '1' };
    const { node: first, writeKey } = await firstNode(env, receiver, children);

    const dead = lease();
    assert.ok(dead.owner !== null, 'the first process holds the Engage lease');
    await first.kill('SIGKILL');
    // As if the dead process had just renewed a long lease: only the start's release can free it now.
    const file = new Database(path.join(dataDir, SQLITE_FILE));
    try {
      file.prepare('UPDATE engage_state SET lease_expires_at = ? WHERE id = 1 AND lease_owner = ?').run(Date.now() + 3_600_000, dead.owner);
    } finally {
      file.close();
    }

    const second = await startChildSwitchyard(env);
    children.push(second);
    await eventually(() => {
      const now = lease();
      return now.owner !== null && now.owner !== dead.owner ? now : undefined;
    }, 30_000, 'the restarted process to take the Engage lease (the dead one runs for another hour)');

    await call(second, 'POST', '/v1/track', { userId: 'after-kill', event: 'Order Completed' }, basicAuth(writeKey));
    await eventually(() => (syncedTo(receiver, 'after-kill') ? true : undefined), 20_000, 'the sync after the restart');
  });
});

await describePostgres('Engage after kill -9 on a single node (PostgreSQL)', () => {
  let db: FreshDatabase;
  let receiver: TestReceiver;
  const children: ChildSwitchyard[] = [];

  before(async () => {
    db = await freshDatabase();
    receiver = await startReceiver();
  });
  after(async () => {
    await Promise.all(children.map((child) => child.kill('SIGKILL')));
    await receiver?.close();
    await db?.drop();
  });

  const sql = async <R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      return (await client.query<R>(text, values)).rows;
    } finally {
      await client.end();
    }
  };
  const lease = async (): Promise<Lease & { backend: string | null }> =>
    (await sql<Lease & { backend: string | null }>(
      'SELECT lease_owner AS owner, lease_expires_at::float8 AS "expiresAt", lease_backend AS backend FROM engage_state WHERE id = 1',
    ))[0]!;

  it('resumes at once: a lease whose holder\'s session is gone is free', { timeout: 120_000 }, async () => {
    const env = { DATABASE_URL: db.url, SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true', SWITCHYARD_WORKERS: '1' };
    const { node: first, writeKey } = await firstNode(env, receiver, children);
    // The lease names the holder's session once its LISTEN connection is up (at the latest at the first renewal).
    const held = await eventually(async () => {
      const now = await lease();
      return now.owner !== null && now.backend !== null ? now : undefined;
    }, 30_000, 'the first process to hold the Engage lease with its session');

    await first.kill('SIGKILL');
    // As if the dead process had just renewed a long lease: only its session's end can free it now.
    await sql('UPDATE engage_state SET lease_expires_at = $1 WHERE id = 1 AND lease_owner = $2', [Date.now() + 3_600_000, held.owner]);

    const second = await startChildSwitchyard(env);
    children.push(second);
    await call(second, 'POST', '/v1/track', { userId: 'after-kill', event: 'Order Completed' }, basicAuth(writeKey));
    await eventually(() => (syncedTo(receiver, 'after-kill') ? true : undefined), 60_000, 'the sync after the restart');
    const taken = await lease();
    assert.notEqual(taken.owner, held.owner, 'the restarted process holds the lease');
  });
});
