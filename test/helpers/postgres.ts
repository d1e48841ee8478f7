import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';

/**
 * PostgreSQL for tests. Suites get a fresh database each, created through the
 * admin URL and dropped afterwards, so they can run in parallel and leave
 * nothing behind. Without a reachable server they skip, loudly; under
 * `REQUIRE_POSTGRES=1` (CI) they fail instead.
 */
export const ADMIN_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

let availability: Promise<string | undefined> | undefined;

/**
 * How long one try to connect may take. A server that is not there refuses
 * at once; this bounds one that is there but slow to answer, as on a CI
 * machine whose two CPUs run several test files at once (3 s was seen to
 * expire there, failing a suite under REQUIRE_POSTGRES=1).
 */
const CONNECT_TIMEOUT_MS = 10_000;
/** Tries in all when a try timed out (a refusal is not tried again). */
const CONNECT_TRIES = 2;

/** Resolves undefined when PostgreSQL answers at {@link ADMIN_URL}, else why not. */
function unavailableReason(): Promise<string | undefined> {
  availability ??= (async () => {
    let reason: string | undefined;
    for (let attempt = 1; attempt <= CONNECT_TRIES; attempt++) {
      const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
      try {
        await client.connect();
        await client.query('SELECT 1');
        return undefined;
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        reason = error instanceof Error && error.message !== '' ? error.message : String(code ?? error);
        if (!/timeout/i.test(reason)) return reason;
      } finally {
        await client.end().catch(() => {});
      }
    }
    return reason;
  })();
  return availability;
}

export async function postgresAvailable(): Promise<boolean> {
  return (await unavailableReason()) === undefined;
}

/** The admin URL without its password, for messages. */
function shownUrl(): string {
  const url = new URL(ADMIN_URL);
  url.password = '';
  return url.toString();
}

/**
 * `describe(name, fn)` when PostgreSQL answers. Otherwise one skipped test
 * that says so (counted in the runner's "skipped"), or, under
 * REQUIRE_POSTGRES=1, one failing test.
 */
export async function describePostgres(name: string, fn: () => void): Promise<void> {
  const reason = await unavailableReason();
  if (reason === undefined) {
    describe(name, fn);
    return;
  }
  const message = `PostgreSQL not reachable at ${shownUrl()} (${reason})`;
  if (process.env['REQUIRE_POSTGRES'] === '1') {
    it(name, () => {
      throw new Error(`${message}; REQUIRE_POSTGRES=1 makes this a failure`);
    });
    return;
  }
  console.warn(`SKIPPING ${name}: ${message}. Set TEST_DATABASE_URL to run it.`);
  it(name, { skip: message }, () => {});
}

/**
 * Runs `suite` on the embedded store, then on PostgreSQL with a fresh
 * database of its own (under {@link describePostgres}: skipped, or failed
 * under REQUIRE_POSTGRES=1, when PostgreSQL does not answer). `flags` are
 * the server's settings for that store, read once the suite starts one.
 */
export async function describeOnBothStores(name: string, suite: (store: 'sqlite' | 'postgres', flags: () => Record<string, string>) => void): Promise<void> {
  suite('sqlite', () => ({}));
  await describePostgres(`${name}: postgres`, () => {
    let db: FreshDatabase | undefined;
    before(async () => {
      db = await freshDatabase();
    });
    after(async () => {
      await db?.drop();
    });
    suite('postgres', () => ({ 'database-url': db!.url }));
  });
}

export interface FreshDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

/** Creates an empty database `switchyard_test_<random>`; `drop()` removes it even with sessions still open. */
export async function freshDatabase(): Promise<FreshDatabase> {
  const name = `switchyard_test_${randomBytes(6).toString('hex')}`;
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Runs one query on its own connection to `url` (the test's view from outside the stores). */
export async function query<R extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * A writer that takes a message seq and stalls before its commit, as a
 * processing transaction does while its commit waits on a slow disk: the
 * stored message `copyOf` (a messageId) again, with `changes` to its body and
 * its new messageId, inserted by a transaction left open. It takes its
 * transaction id first, as every transaction of Switchyard's that inserts
 * messages does. `COMMIT` on the client ends it; end the client after.
 */
export async function holdMessageInsert(url: string, copyOf: string, changes: { readonly messageId: string; readonly event?: string }): Promise<pg.Client> {
  const [stored] = await query<{ source_id: string; type: string; user_id: string | null; body: string }>(
    url,
    `SELECT source_id, type, user_id, body FROM messages WHERE message_id = $1`,
    [copyOf],
  );
  if (stored === undefined) throw new Error(`no stored message ${copyOf}`);
  const body = JSON.stringify({ ...(JSON.parse(stored.body) as object), ...changes });
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query('BEGIN; SELECT txid_current()');
    await client.query(
      `INSERT INTO messages (source_id, status, type, message_id, user_id, received_at, body) VALUES ($1, 'accepted', $2, $3, $4, $5, $6)`,
      [stored.source_id, stored.type, changes.messageId, stored.user_id, Date.now(), body],
    );
    return client;
  } catch (error) {
    await client.end();
    throw error;
  }
}

/** Backend pids of the sessions LISTENing on `url`'s database (their last statement was the LISTEN), one per store. */
export async function listenerPids(url: string): Promise<number[]> {
  const rows = await query<{ pid: number }>(
    url,
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN switchyard_%'`,
  );
  return rows.map((r) => r.pid);
}
