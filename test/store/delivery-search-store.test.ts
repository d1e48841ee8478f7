import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION, migrate as migratePostgres } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SCHEMA_VERSION as SQLITE_SCHEMA_VERSION, migrate as migrateSqlite } from '../../src/store/sqlite/migrations.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';

/**
 * The lookups behind `GET /deliveries?userId=&messageId=`: messages stored
 * before the upgrade that added them are found too, and (SQLite's
 * message_keys) a message that goes takes its keys with it.
 */

/** Messages and their deliveries as an older version stored them, in SQL both stores take. */
const OLD_ROWS = [
  `INSERT INTO messages (source_id, status, type, message_id, user_id, received_at, body) VALUES
     ('s', 'accepted', 'track', 'old-1', 'ada', ${T0}, '{"type":"track","event":"Old","userId":"ada","messageId":"old-1"}'),
     ('s', 'accepted', 'track', 'old-2', NULL, ${T0}, '{"type":"track","event":"Old","anonymousId":"a1","messageId":"old-2"}'),
     ('s', 'accepted', 'track', NULL, NULL, ${T0}, '{"type":"track","event":"Nameless"}')`,
  `INSERT INTO deliveries (source_id, message_seq, destination, status, created_at, updated_at)
     SELECT source_id, seq, 'webhooks', 'succeeded', ${T0}, ${T0} FROM messages`,
];

async function checkOldRowsFound(store: Store): Promise<void> {
  const byUser = await store.listDeliveries({ userId: 'ada', limit: 10 });
  assert.deepEqual(
    byUser.map((d) => d.messageId),
    ['old-1'],
  );
  assert.deepEqual(
    (await store.listDeliveries({ messageId: 'old-2', limit: 10 })).map((d) => d.messageId),
    ['old-2'],
  );
  assert.equal((await store.listDeliveries({ limit: 10 })).length, 3, 'the message without ids keeps its delivery, unlisted by either filter');
  // And what arrives after the upgrade.
  await store.appendMessages([storeEntry('s', { messageId: 'new-1', userId: 'ada' })], 0);
  assert.deepEqual(
    (await store.listDeliveries({ userId: 'ada', limit: 10 })).map((d) => d.messageId),
    ['new-1', 'old-1'],
  );
}

describe('deliveries by user and messageId: sqlite', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'delivery-search-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('finds the messages stored before the upgrade', async () => {
    const folder = path.join(dir, 'upgrade');
    const store = SqliteStore.open({ dataDir: folder, durability: 'process' });
    try {
      const db = new BetterSqlite3(path.join(folder, SQLITE_FILE));
      migrateSqlite(db, SQLITE_SCHEMA_VERSION - 1);
      for (const sql of OLD_ROWS) db.exec(sql);
      db.close();
      await store.migrate();
      await checkOldRowsFound(store);
    } finally {
      await store.close();
    }
  });

  it('drops the keys of messages that go: pruned, erased, or with their source', async () => {
    const folder = path.join(dir, 'deletes');
    const store = SqliteStore.open({ dataDir: folder, durability: 'process' });
    await store.migrate();
    const keys = new BetterSqlite3(path.join(folder, SQLITE_FILE), { readonly: true });
    const keyRows = (): number => keys.prepare(`SELECT count(*) FROM message_keys`).pluck().get() as number;
    try {
      await addSource(store, 'kept');
      await addSource(store, 'gone');
      await store.prepareIngest(0);
      // No destinations: nothing holds the messages back from pruning.
      await store.appendMessages(
        [
          storeEntry('kept', { messageId: 'k-1', userId: 'ada', receivedAt: T0, destinations: [] }),
          storeEntry('kept', { messageId: 'k-2', userId: 'ada', receivedAt: T0 + 10 * 60_000, destinations: [] }),
          storeEntry('gone', { messageId: 'g-1', userId: 'bob', receivedAt: T0 + 10 * 60_000, destinations: [] }),
        ],
        0,
      );
      assert.equal(keyRows(), 3);
      await store.prune(T0 + 60_000);
      assert.equal(keyRows(), 2, 'the pruned message took its keys');
      assert.equal(await store.deleteSource('gone'), true);
      assert.equal(keyRows(), 1, "the source's messages took theirs");
      assert.equal(keys.prepare(`SELECT rowid FROM message_keys WHERE message_keys MATCH ?`).all(`m${Buffer.from('k-2').toString('hex')}`).length, 1);
    } finally {
      keys.close();
      await store.close();
    }
  });
});

await describePostgres('deliveries by user and messageId: postgres', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });

  it('finds the messages stored before the upgrade', async () => {
    const pool = new pg.Pool({ connectionString: db.url });
    try {
      await migratePostgres(pool, POSTGRES_SCHEMA_VERSION - 1);
      for (const sql of OLD_ROWS) await pool.query(sql);
    } finally {
      await pool.end();
    }
    const store = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    try {
      await store.migrate();
      await checkOldRowsFound(store);
    } finally {
      await store.close();
    }
  });
});
