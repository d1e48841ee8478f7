import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { migrate as migratePostgres } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { migrate as migrateSqlite } from '../../src/store/sqlite/migrations.js';
import { MESSAGE_KEYS_BATCH } from '../../src/store/sqlite/message-keys.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';

/**
 * The lookups behind `GET /deliveries?userId=&messageId=`: messages stored
 * before the upgrade that added them are found too, every message is found
 * whether SQLite's message_keys holds it yet or not (it is written a batch
 * at a time), and a message that goes takes its keys with it.
 */

/** SQLite schema versions: before message_keys, and with it kept by a trigger per message (fixed numbers: later migrations append). */
const SQLITE_BEFORE_KEYS = 19;
const SQLITE_KEYS_BY_TRIGGER = 20;
/** PostgreSQL's schema version before messages_by_message_id. */
const POSTGRES_BEFORE_MESSAGE_ID_INDEX = 19;

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

/**
 * Cyd's messages spread over more than two batches of message_keys, so that
 * on SQLite some are indexed and the newest are not: each filter finds
 * exactly hers, newest first.
 */
async function checkFoundAcrossBatches(store: Store): Promise<void> {
  await addSource(store, 'many');
  await store.prepareIngest(0);
  const cyd: string[] = [];
  const entries = Array.from({ length: 2 * MESSAGE_KEYS_BATCH + 40 }, (_, i) => {
    const userId = i % 37 === 0 ? 'cyd' : `user-${i}`;
    const entry = storeEntry('many', { userId, messageId: `many-${i}` });
    if (userId === 'cyd') cyd.unshift(entry.messageId!);
    return entry;
  });
  // Small calls, as processing makes them at low rates.
  for (let i = 0; i < entries.length; i += 7) await store.appendMessages(entries.slice(i, i + 7), 0);
  const found = await store.listDeliveries({ userId: 'cyd', limit: 100 });
  assert.deepEqual(
    found.map((d) => d.messageId),
    cyd,
  );
  for (const i of [0, MESSAGE_KEYS_BATCH + 1, entries.length - 1]) {
    assert.deepEqual(
      (await store.listDeliveries({ messageId: `many-${i}`, limit: 10 })).map((d) => d.messageId),
      [`many-${i}`],
      `message ${i}`,
    );
  }
  assert.deepEqual(await store.listDeliveries({ userId: 'cyd', messageId: 'many-1', limit: 10 }), [], 'both filters at once: many-1 is not cyd\'s');
}

describe('deliveries by user and messageId: sqlite', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'delivery-search-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const [name, version] of [
    ['before message_keys', SQLITE_BEFORE_KEYS],
    ['when a trigger kept message_keys', SQLITE_KEYS_BY_TRIGGER],
  ] as const) {
    it(`finds the messages stored ${name}`, async () => {
      const folder = path.join(dir, `upgrade-${version}`);
      const store = SqliteStore.open({ dataDir: folder, durability: 'process' });
      try {
        const db = new BetterSqlite3(path.join(folder, SQLITE_FILE));
        migrateSqlite(db, version);
        for (const sql of OLD_ROWS) db.exec(sql);
        db.close();
        await store.migrate();
        await checkOldRowsFound(store);
      } finally {
        await store.close();
      }
    });
  }

  it('finds every message, indexed yet or not', async () => {
    const store = SqliteStore.open({ dataDir: path.join(dir, 'batches'), durability: 'process' });
    try {
      await store.migrate();
      await checkFoundAcrossBatches(store);
    } finally {
      await store.close();
    }
  });

  it('drops the keys of messages that go: pruned, erased, or with their source', async () => {
    const folder = path.join(dir, 'deletes');
    const store = SqliteStore.open({ dataDir: folder, durability: 'process' });
    await store.migrate();
    const db = new BetterSqlite3(path.join(folder, SQLITE_FILE), { readonly: true });
    const keyRows = (): number => db.prepare(`SELECT count(*) FROM message_keys`).pluck().get() as number;
    const indexedSeq = (): number => db.prepare(`SELECT indexed_seq FROM message_keys_state`).pluck().get() as number;
    const matches = (messageId: string): number => db.prepare(`SELECT count(*) FROM message_keys WHERE message_keys MATCH ?`).pluck().get(`m${Buffer.from(messageId).toString('hex')}`) as number;
    // message_keys holds exactly the stored messages up to indexed_seq, and fewer than a batch wait.
    const checkInStep = (): void => {
      assert.equal(keyRows(), db.prepare(`SELECT count(*) FROM messages WHERE seq <= ?`).pluck().get(indexedSeq()));
      assert.ok((db.prepare(`SELECT MAX(seq) FROM messages`).pluck().get() as number) - indexedSeq() < MESSAGE_KEYS_BATCH);
    };
    const fillers = (count: number) =>
      Array.from({ length: count }, (_, i) => storeEntry('kept', { messageId: `f-${Math.random()}-${i}`, receivedAt: T0 + 10 * 60_000, destinations: [] }));
    try {
      await addSource(store, 'kept');
      await addSource(store, 'gone');
      await store.prepareIngest(0);
      // No destinations: nothing holds the messages back from pruning.
      // A first batch, indexed as its last message is stored ...
      await store.appendMessages(
        [
          storeEntry('kept', { messageId: 'k-1', userId: 'ada', receivedAt: T0, destinations: [] }),
          storeEntry('kept', { messageId: 'k-2', userId: 'ada', receivedAt: T0 + 10 * 60_000, destinations: [] }),
          storeEntry('gone', { messageId: 'g-1', userId: 'bob', receivedAt: T0 + 10 * 60_000, destinations: [] }),
          ...fillers(MESSAGE_KEYS_BATCH - 3),
        ],
        0,
      );
      assert.equal(keyRows(), MESSAGE_KEYS_BATCH);
      // ... and three more, not indexed yet.
      await store.appendMessages(
        [
          storeEntry('kept', { messageId: 'k-3', userId: 'ada', receivedAt: T0, destinations: [] }),
          storeEntry('gone', { messageId: 'g-2', userId: 'bob', receivedAt: T0 + 10 * 60_000, destinations: [] }),
          storeEntry('kept', { messageId: 'k-4', userId: 'ada', receivedAt: T0 + 10 * 60_000, destinations: [] }),
        ],
        0,
      );
      assert.equal(keyRows(), MESSAGE_KEYS_BATCH);
      checkInStep();
      await store.prune(T0 + 60_000);
      assert.equal(keyRows(), MESSAGE_KEYS_BATCH - 1, 'the pruned indexed message took its keys (the other had none yet)');
      assert.equal(await store.deleteSource('gone'), true);
      assert.equal(keyRows(), MESSAGE_KEYS_BATCH - 2, "the source's messages took theirs");
      checkInStep();
      // The next batch indexes what is left and never what went.
      await store.appendMessages(fillers(MESSAGE_KEYS_BATCH), 0);
      checkInStep();
      assert.deepEqual(
        ['k-1', 'k-2', 'k-3', 'k-4', 'g-1', 'g-2'].map(matches),
        [0, 1, 0, 1, 0, 0],
      );
    } finally {
      db.close();
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
      await migratePostgres(pool, POSTGRES_BEFORE_MESSAGE_ID_INDEX);
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

  it('finds every message of a user among many', async () => {
    const store = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    try {
      await store.migrate();
      await checkFoundAcrossBatches(store);
    } finally {
      await store.close();
    }
  });
});
