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
 *
 * And on PostgreSQL, with two nodes on one database: a node started beside a
 * live holder does not take its lease (it asks and is refused, as the
 * database's own log of those statements shows), and takes it once that
 * holder is killed, while the dead lease still had an hour to run.
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
      const pushed = file.prepare('UPDATE engage_state SET lease_expires_at = ? WHERE id = 1 AND lease_owner = ?').run(Date.now() + 3_600_000, dead.owner);
      assert.equal(pushed.changes, 1, 'the dead process still holds the lease after the kill');
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

/** One statement on its own connection to `url`. */
async function query<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** The Engage lease as PostgreSQL holds it, with the holder's session. */
async function postgresLease(url: string): Promise<Lease & { backend: string | null }> {
  return (await query<Lease & { backend: string | null }>(url, 'SELECT lease_owner AS owner, lease_expires_at::float8 AS "expiresAt", lease_backend AS backend FROM engage_state WHERE id = 1'))[0]!;
}

/**
 * What each PostgreSQL suite below works with: a fresh database (`url`), a
 * receiver and the processes it starts, all ended after the suite. Read
 * `url` and `receiver` inside tests: they exist once the suite has begun.
 */
function postgresSuite() {
  const children: ChildSwitchyard[] = [];
  let database: FreshDatabase | undefined;
  let receiver: TestReceiver | undefined;
  before(async () => {
    database = await freshDatabase();
    receiver = await startReceiver();
  });
  after(async () => {
    await Promise.all(children.map((child) => child.kill('SIGKILL')));
    await receiver?.close();
    await database?.drop();
  });
  const suite = {
    children,
    get url(): string {
      return database!.url;
    },
    get receiver(): TestReceiver {
      return receiver!;
    },
    sql: <R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> => query<R>(suite.url, text, values),
    lease: (): Promise<Lease & { backend: string | null }> => postgresLease(suite.url),
  };
  return suite;
}

await describePostgres('Engage after kill -9 on a single node (PostgreSQL)', () => {
  const suite = postgresSuite();
  const { children, sql, lease } = suite;

  it('resumes at once: a lease whose holder\'s session is gone is free', { timeout: 120_000 }, async () => {
    const env = { DATABASE_URL: suite.url, SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true', SWITCHYARD_WORKERS: '1' };
    const { node: first, writeKey } = await firstNode(env, suite.receiver, children);
    // The lease names the holder's session once its LISTEN connection is up (at the latest at the first renewal).
    const held = await eventually(async () => {
      const now = await lease();
      return now.owner !== null && now.backend !== null ? now : undefined;
    }, 30_000, 'the first process to hold the Engage lease with its session');

    await first.kill('SIGKILL');
    // As if the dead process had just renewed a long lease: only its session's end can free it now.
    const pushed = await sql('UPDATE engage_state SET lease_expires_at = $1 WHERE id = 1 AND lease_owner = $2 RETURNING id', [Date.now() + 3_600_000, held.owner]);
    assert.equal(pushed.length, 1, 'the dead process still holds the lease after the kill');

    const second = await startChildSwitchyard(env);
    children.push(second);
    await call(second, 'POST', '/v1/track', { userId: 'after-kill', event: 'Order Completed' }, basicAuth(writeKey));
    await eventually(() => (syncedTo(suite.receiver, 'after-kill') ? true : undefined), 60_000, 'the sync after the restart');
    const taken = await lease();
    assert.ok(taken.owner !== null && taken.owner !== held.owner, `the restarted process holds the lease: ${JSON.stringify(taken)}`);
  });
});

/** `url` with the sessions named `name` in pg_stat_activity and `current_setting('application_name')` (one in the URL wins). */
const named = (url: string, name: string): string => {
  const withName = new URL(url);
  withName.searchParams.set('application_name', name);
  return withName.toString();
};

await describePostgres('Engage with two nodes on one database (PostgreSQL)', () => {
  const A = 'switchyard-node-a';
  const B = 'switchyard-node-b';
  const HOUR = 3_600_000;
  const suite = postgresSuite();
  const { children, sql, lease } = suite;
  /** The UPDATEs of engage_state node `app` made so far: those that changed the row, and those that changed nothing (a refused claim). */
  const updatesBy = async (app: string): Promise<{ changed: number; refused: number }> =>
    (await sql<{ changed: number; refused: number }>(
      'SELECT count(*) FILTER (WHERE rows > 0)::int AS changed, count(*) FILTER (WHERE rows = 0)::int AS refused FROM test_engage_updates WHERE app = $1',
      [app],
    ))[0]!;

  it('a node beside a live holder does not take the lease; once the holder is killed it does, before that lease ends', { timeout: 120_000 }, async () => {
    const env = (app: string): Record<string, string> => ({
      DATABASE_URL: named(suite.url, app),
      SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
      SWITCHYARD_WORKERS: '1',
    });
    const { node: a, writeKey } = await firstNode(env(A), suite.receiver, children);
    const held = await eventually(async () => {
      const now = await lease();
      return now.owner !== null && now.backend !== null ? now : undefined;
    }, 30_000, 'node A to hold the Engage lease with its session');

    // The database, not the test's clock, decides and records: node A's lease lasts an hour longer at every claim and
    // renewal (so it cannot run out during the test, however slow the machine), and every UPDATE of engage_state is
    // logged with the session's application_name and how many rows it changed (a refused claim changes none).
    await sql(`CREATE TABLE test_engage_updates (id bigserial PRIMARY KEY, app text NOT NULL, rows bigint NOT NULL)`);
    await sql(`CREATE FUNCTION test_engage_updated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO test_engage_updates (app, rows) SELECT current_setting('application_name'), count(*) FROM changed;
        RETURN NULL;
      END $$`);
    await sql(`CREATE TRIGGER test_engage_updated AFTER UPDATE ON engage_state REFERENCING NEW TABLE AS changed
      FOR EACH STATEMENT EXECUTE FUNCTION test_engage_updated()`);
    await sql(`CREATE FUNCTION test_engage_long_lease() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_setting('application_name') = '${A}' AND NEW.lease_owner IS NOT NULL THEN
          NEW.lease_expires_at := NEW.lease_expires_at + ${HOUR};
        END IF;
        RETURN NEW;
      END $$`);
    await sql(`CREATE TRIGGER test_engage_long_lease BEFORE UPDATE ON engage_state FOR EACH ROW EXECUTE FUNCTION test_engage_long_lease()`);
    // The lease A holds now, too (its renewals then keep it an hour ahead).
    const pushed = await sql('UPDATE engage_state SET lease_expires_at = $1 WHERE id = 1 AND lease_owner = $2 RETURNING id', [Date.now() + HOUR, held.owner]);
    assert.equal(pushed.length, 1, 'node A still holds the lease');

    const b = await startChildSwitchyard(env(B));
    children.push(b);
    // B asks at every Engage pass: until it was refused three times (it did ask, more than once), or took the lease.
    const asked = await eventually(async () => {
      const updates = await updatesBy(B);
      return updates.refused >= 3 || updates.changed > 0 ? updates : undefined;
    }, 60_000, 'node B to ask for the lease three times');
    assert.equal(a.process.exitCode, null, 'node A lives');
    assert.equal(a.process.signalCode, null, 'node A lives');
    assert.equal(asked.changed, 0, `node B changed engage_state (took the lease) while node A lived: ${JSON.stringify(asked)}`);
    const live = await lease();
    assert.equal(live.owner, held.owner, 'node A still holds the lease');
    assert.equal(live.backend, held.backend, 'with its session');

    // Every later renewal by A only ends later: nothing can end A's lease before this.
    const deadEnds = live.expiresAt;
    assert.ok(deadEnds > Date.now() + HOUR / 2, `node A's lease runs for about an hour: ends at ${deadEnds}`);
    await a.kill('SIGKILL');
    const taken = await eventually(async () => {
      const now = await lease();
      return now.owner !== null && now.owner !== held.owner ? now : undefined;
    }, 60_000, 'node B to take the lease of the killed node A (that lease runs for another hour)');
    // B's lease ends LEASE_MS (15 s) after its claim: it claimed well before A's lease would have ended.
    assert.ok(taken.expiresAt < deadEnds, `node B's lease ${JSON.stringify(taken)} was taken before A's ended at ${deadEnds}`);
    assert.ok((await updatesBy(B)).changed >= 1, 'node B took the lease itself');

    await call(b, 'POST', '/v1/track', { userId: 'after-kill-a', event: 'Order Completed' }, basicAuth(writeKey));
    await eventually(() => (syncedTo(suite.receiver, 'after-kill-a') ? true : undefined), 60_000, 'the sync by node B after the kill');
  });
});
