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
import { describePostgres, freshDatabase, query } from '../helpers/postgres.js';
import { T0 } from '../helpers/store-fixtures.js';

/**
 * Migration 7 (PostgreSQL's schema version 6) moves computed trait values
 * from profile_outputs rows onto the profile row: a store with Engage data
 * from before must read the same profiles, values and members after the upgrade.
 */

/** Rows from before migration 7: a trait with a number, one with a list, an audience; p1 has all three, p2 none. */
const AT_VERSION_6 = [
  `INSERT INTO computations (id, kind, name, key, definition, destinations, status, version, created_at, updated_at) VALUES
     ('ct_orders', 'trait', 'Orders', 'orders', '{"type":"event_counter","event":"Order Completed"}', '[]', 'live', 1, ${T0}, ${T0}),
     ('ct_coupons', 'trait', 'Coupons', 'coupons', '{"type":"unique_list","event":"Order Completed","property":"coupon"}', '[]', 'live', 1, ${T0}, ${T0}),
     ('aud_buyers', 'audience', 'Buyers', 'buyers', '{"performed":{"event":"Order Completed"}}', '[]', 'live', 1, ${T0}, ${T0})`,
  `INSERT INTO profiles (id, state, version, recent_seqs, next_expiry, updated_at) VALUES
     ('p1', '{"kept":"as is"}', 3, '[7,5]', ${T0 + 60_000}, ${T0}),
     ('p2', '{}', 1, '[]', NULL, ${T0})`,
  `INSERT INTO profile_identifiers (identifier, profile_id) VALUES ('user_id:u1', 'p1'), ('user_id:u2', 'p2')`,
  `INSERT INTO profile_outputs (computation_id, profile_id, value, since) VALUES
     ('ct_orders', 'p1', '4', ${T0}), ('ct_coupons', 'p1', '["A","B"]', ${T0}), ('aud_buyers', 'p1', 'true', ${T0 + 1})`,
];

async function checkUpgraded(store: Store, outputRows: () => Promise<string[]>): Promise<void> {
  const profiles = await store.getProfiles(['p1', 'p2']);
  const p1 = profiles.find((p) => p.id === 'p1');
  const p2 = profiles.find((p) => p.id === 'p2');
  assert.deepEqual(
    [p1?.state, p1?.version, p1?.recentSeqs, p1?.nextExpiry, p1?.identifiers],
    ['{"kept":"as is"}', 3, [7, 5], T0 + 60_000, ['user_id:u1']],
  );
  assert.deepEqual(p1?.outputs, { ct_orders: 4, ct_coupons: ['A', 'B'], aud_buyers: true }, 'trait values and the membership read as before');
  assert.deepEqual(p2?.outputs, {});
  assert.deepEqual(await outputRows(), ['aud_buyers/p1'], 'only the audience member keeps a row');
  const members = await store.listComputationMembers('aud_buyers', 10);
  assert.deepEqual(members.map((m) => [m.profileId, m.value, m.since]), [['p1', true, T0 + 1]]);
  assert.equal((await store.getComputation('aud_buyers'))?.size, 1);

  // The upgraded row takes the next versioned write, trait values with it.
  const write = (expectedVersion: number) => ({
    deletedProfiles: [],
    profiles: [{ id: 'p1', expectedVersion, state: '{}', identifiers: [], membershipChanges: [], computedTraits: { ct_orders: 5 }, recentSeqs: [], nextExpiry: undefined }],
    messages: [],
    at: T0 + 2,
  });
  assert.equal(await store.commitEngage(write(2)), false, 'the version check holds on the upgraded row');
  assert.equal(await store.commitEngage(write(3)), true);
  assert.deepEqual((await store.getProfiles(['p1']))[0]?.outputs, { ct_orders: 5, aud_buyers: true });
}

void describe('Engage data through migration 7: sqlite', () => {
  void it('keeps trait values (now on the profile row), memberships, states and versions', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'engage-migration-'));
    try {
      const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
      // Schema 6 with data, written straight to the file before the store migrates it.
      const db = new BetterSqlite3(path.join(dir, SQLITE_FILE));
      migrateSqlite(db, 6);
      for (const sql of AT_VERSION_6) db.exec(sql);
      db.close();
      await store.migrate();
      const rows = async (): Promise<string[]> => {
        const raw = new BetterSqlite3(path.join(dir, SQLITE_FILE), { readonly: true });
        try {
          return (raw.prepare('SELECT computation_id, profile_id FROM profile_outputs ORDER BY 1, 2').all() as Array<{ computation_id: string; profile_id: string }>).map(
            (r) => `${r.computation_id}/${r.profile_id}`,
          );
        } finally {
          raw.close();
        }
      };
      await checkUpgraded(store, rows);
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

await describePostgres('Engage data through migration 7: postgres', () => {
  void it('keeps trait values (now on the profile row), memberships, states and versions', async () => {
    const fresh = await freshDatabase();
    try {
      const pool = new pg.Pool({ connectionString: fresh.url, max: 1 });
      try {
        // PostgreSQL never had SQLite's migration 3 (an SQLite-only table dropped): its schema 5 is SQLite's 6.
        await migratePostgres(pool, 5);
        for (const sql of AT_VERSION_6) await pool.query(sql);
      } finally {
        await pool.end();
      }
      const store = PostgresStore.open({ databaseUrl: fresh.url, durability: 'process' });
      try {
        await store.migrate();
        const rows = async (): Promise<string[]> =>
          (await query<{ row: string }>(fresh.url, `SELECT computation_id || '/' || profile_id AS row FROM profile_outputs ORDER BY 1`)).map((r) => r.row);
        await checkUpgraded(store, rows);
      } finally {
        await store.close();
      }
    } finally {
      await fresh.drop();
    }
  });
});
