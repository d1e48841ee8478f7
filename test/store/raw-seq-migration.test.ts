import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { migrate as migratePostgres } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { migrate as migrateSqlite } from '../../src/store/sqlite/migrations.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase } from '../helpers/postgres.js';
import { T0, storeEntry } from '../helpers/store-fixtures.js';

/**
 * SQLite's migration 9 (PostgreSQL's schema version 8): a deletion waits for
 * the raw requests up to the seq it recorded when stored, no longer for
 * those received (by some node's clock) before its createdAt. A deletion
 * stored before the upgrade, still waiting, must still wait for the raw
 * requests acknowledged before it; and a seq is never handed out twice, even
 * once processing has emptied the table.
 */

const MINUTE = 60_000;

/** Rows from before the migration: a deletion still pending, and three raw requests received (by a clock ahead) after its createdAt. */
function atOldVersion(subjects: string): string[] {
  const raw = `('s', 'track', ${T0 + 5 * MINUTE}, NULL, 1, 1, NULL, '{"userId":"gone"}')`;
  return [
    `INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES ('s', 's', 'key', 'hash', true, ${T0}, ${T0})`,
    `INSERT INTO raw_requests (source_id, route, received_at, ip, config_version, message_count, headers, body) VALUES ${raw}, ${raw}, ${raw}`,
    `INSERT INTO regulations (id, regulation_type, subject_ids, subject_count, source_ids, status, created_at, updated_at)
       VALUES ('reg_old', 'DELETE_ONLY', ${subjects}, 1, NULL, 'INITIALIZED', ${T0}, ${T0})`,
    `INSERT INTO regulation_sources (regulation_id, source_id, status, updated_at) VALUES ('reg_old', 's', 'PENDING', ${T0})`,
  ];
}

async function checkUpgraded(store: Store): Promise<void> {
  const regulation = await store.getRegulation('reg_old');
  assert.ok(regulation !== undefined);
  const mark = regulation.rawSeqMark;
  assert.equal(mark, 3, 'the highest raw seq at the upgrade');
  assert.equal(await store.hasRawRequestsUpTo(mark), true, 'the old deletion still waits for its raw requests');
  const build = (rows: readonly { sourceId: string; receivedAt: number; body: string }[]) =>
    rows.map((row) => [storeEntry(row.sourceId, { receivedAt: row.receivedAt, body: row.body, destinations: [] })]);
  assert.equal((await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0)).requests, 3);
  assert.equal(await store.hasRawRequestsUpTo(mark), false);
  assert.equal(await store.highestRawSeq(), 0, 'nothing left to process');

  // The table is empty now; the next request still gets a seq above every mark.
  await store.appendRawRequests([
    { sourceId: 's', route: 'track', receivedAt: T0, ip: undefined, configVersion: 1, messageCount: 1, headers: undefined, body: '{"userId":"later"}' },
  ]);
  assert.equal(await store.highestRawSeq(), 4, 'seqs go on from where they were, never again from 1');
  assert.equal(await store.hasRawRequestsUpTo(mark), false, 'the old deletion does not wait for a request after it');
  await store.createRegulation({ id: 'reg_new', regulationType: 'DELETE_ONLY', subjectIds: ['later'], sourceIds: undefined, stepSourceIds: ['s'], createdAt: T0 - MINUTE });
  assert.equal((await store.getRegulation('reg_new'))?.rawSeqMark, 4, 'a new deletion records the highest raw seq, whatever the clocks');
}

void describe('raw seq marks through migration 9: sqlite', () => {
  void it('gives a waiting deletion the highest raw seq, and never hands a seq out twice', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raw-seq-migration-'));
    try {
      const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
      const db = new BetterSqlite3(path.join(dir, SQLITE_FILE));
      migrateSqlite(db, 8);
      for (const sql of atOldVersion(`'["gone"]'`)) db.exec(sql.replace(/\btrue\b/, '1'));
      db.close();
      await store.migrate();
      try {
        await checkUpgraded(store);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

await describePostgres('raw seq marks through migration 9: postgres', () => {
  void it('gives a waiting deletion the highest raw seq, and never hands a seq out twice', async () => {
    const fresh = await freshDatabase();
    try {
      const pool = new pg.Pool({ connectionString: fresh.url, max: 1 });
      try {
        // PostgreSQL never had SQLite's migration 3: its schema 7 is SQLite's 8.
        await migratePostgres(pool, 7);
        for (const sql of atOldVersion(`ARRAY['gone']`)) await pool.query(sql);
      } finally {
        await pool.end();
      }
      const store = PostgresStore.open({ databaseUrl: fresh.url, durability: 'process' });
      try {
        await store.migrate();
        await checkUpgraded(store);
      } finally {
        await store.close();
      }
    } finally {
      await fresh.drop();
    }
  });
});
