import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { migrate as migratePostgres } from '../../src/store/postgres/migrations.js';
import { migrate as migrateSqlite } from '../../src/store/sqlite/migrations.js';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-store.js';
import { describeOnBothStores } from '../helpers/postgres.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * Replays stored before the admin API checked their times (bff2c94): a
 * `from` or `to` of any number was stored, and one past what a JavaScript
 * Date holds made the source's replay list (and the replay itself) answer
 * 500 "Invalid time value" for good. The upgrade (SQLite's migration 25,
 * PostgreSQL's 22) brings them into the range the API takes, 1970 to 9999.
 * The rows are written as the previous schema version stored them.
 */

const SOURCE = 'src_replays';
const FIRST = '1970-01-01T00:00:00.000Z';
const LAST = '9999-12-31T23:59:59.999Z';
const T = Date.UTC(2026, 0, 1);

/** id, from_at, to_at, status: past a Date both ways, past the API's range within a Date, and in range. */
const OLD_REPLAYS: ReadonlyArray<readonly [string, number | bigint, number | bigint, string]> = [
  ['rp_before_dates', -8_640_000_000_000_001, T, 'done'],
  ['rp_after_dates', T, 9_223_372_036_854_775_807n, 'running'],
  ['rp_both', 8_640_000_000_000_001, 99_999_999_999_999_999n, 'cancelled'],
  ['rp_in_date', -1, 253_402_300_800_000, 'done'],
  ['rp_fine', T, T + 60_000, 'done'],
];

const INSERT_SOURCE = `INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES ('${SOURCE}', 'r', 'key_r', 'hash_r', true, ${T}, ${T})`;

function insertReplay(placeholders: (n: number) => string): string {
  const p = placeholders;
  return `INSERT INTO replays (id, source_id, from_at, to_at, receivers, types, events, status, cursor_seq, queued, created_at, updated_at)
    VALUES (${p(1)}, '${SOURCE}', ${p(2)}, ${p(3)}, NULL, NULL, NULL, ${p(4)}, 0, 0, ${T}, ${T})`;
}

/** SQLite at schema 23, the version before the migration; a from or to that overflowed int64 was stored as a REAL. */
function oldSqlite(dir: string): void {
  const db = new BetterSqlite3(path.join(dir, SQLITE_FILE));
  try {
    migrateSqlite(db, 23);
    db.exec(INSERT_SOURCE.replace(/\btrue\b/, '1'));
    const insert = db.prepare(insertReplay(() => '?'));
    for (const [id, from, to, status] of OLD_REPLAYS) insert.run(id, from, id === 'rp_both' ? 1e20 : to, status);
  } finally {
    db.close();
  }
}

/** PostgreSQL at schema 21, the version before the migration. */
async function oldPostgres(url: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await migratePostgres(pool, 21);
    await pool.query(INSERT_SOURCE);
    for (const [id, from, to, status] of OLD_REPLAYS) await pool.query(insertReplay((n) => `$${n}`), [id, String(from), String(to), status]);
  } finally {
    await pool.end();
  }
}

function describeOldReplays(store: 'sqlite' | 'postgres', flags: () => Record<string, string>): void {
  void describe(`replays stored with times out of range, after the upgrade: ${store}`, () => {
    let dir: string | undefined;
    let sy: TestSwitchyard;
    before(async () => {
      if (store === 'sqlite') {
        dir = await mkdtemp(path.join(tmpdir(), 'replay-times-migration-'));
        oldSqlite(dir);
        sy = await startTestSwitchyard({ 'data-dir': dir });
      } else {
        await oldPostgres(flags()['database-url']!);
        sy = await startTestSwitchyard(flags());
      }
    });
    after(async () => {
      await sy?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    void it("answers the source's replay list with each time in the API's range, the rest unchanged", async () => {
      const list = await sy.admin('GET', `/sources/${SOURCE}/replays`);
      assert.equal(list.status, 200, JSON.stringify(list.body));
      const shown = Object.fromEntries(
        list.body.replays.map((r: { id: string; from: string; to: string; status: string }) => [r.id, [r.from, r.to, r.status]]),
      );
      const t = new Date(T).toISOString();
      assert.deepEqual(shown, {
        rp_before_dates: [FIRST, t, 'done'],
        rp_after_dates: [t, LAST, 'running'],
        rp_both: [LAST, LAST, 'cancelled'],
        rp_in_date: [FIRST, LAST, 'done'],
        rp_fine: [t, new Date(T + 60_000).toISOString(), 'done'],
      });
    });

    void it('answers each such replay by its id', async () => {
      for (const [id] of OLD_REPLAYS) {
        const replay = await sy.admin('GET', `/replays/${id}`);
        assert.equal(replay.status, 200, `${id}: ${JSON.stringify(replay.body)}`);
      }
    });
  });
}

await describeOnBothStores('replays stored with times out of range', describeOldReplays);
