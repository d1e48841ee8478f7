import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { EngageBatch, ProfileWrite } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase, query } from '../helpers/postgres.js';
import { T0 } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

/** How many of the stores' sessions (not the test's own) wait for a row lock. */
async function lockWaiters(url: string): Promise<number> {
  const [row] = await query<{ n: number }>(
    url,
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND application_name = 'switchyard' AND wait_event_type = 'Lock'`,
  );
  return row!.n;
}

const write = (id: string, expectedVersion: number, state: string): ProfileWrite => ({
  id,
  expectedVersion,
  state,
  identifiers: [`user_id:${id}`],
  membershipChanges: [],
  computedTraits: {},
  recentSeqs: [],
  nextExpiry: undefined,
});
const batch = (overrides: Partial<EngageBatch>): EngageBatch => ({ deletedProfiles: [], profiles: [], messages: [], at: T0, ...overrides });

/**
 * Engage writes on PostgreSQL where only a shared store can go wrong: two
 * stores on one database stand for two nodes writing one profile at once.
 */
await describePostgres('PostgreSQL Engage writes on several nodes', () => {
  let db: FreshDatabase;
  let a: PostgresStore;
  let b: PostgresStore;

  before(async () => {
    db = await freshDatabase();
    a = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    b = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    await a.migrate();
    await b.migrate();
  });
  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await db?.drop();
  });

  it('loses no update when two nodes write one profile at once: the second waits, then finds the version changed', { timeout: 60_000 }, async () => {
    assert.equal(await a.commitEngage(batch({ profiles: [write('p1', 0, '"v1"')] })), true);
    await a.insertComputation({
      id: 'aud_hold', kind: 'audience', name: 'hold', key: 'hold', definition: { trait: { key: 'x', op: 'exists' } },
      destinations: [], status: 'computing', version: 1, createdAt: T0, updatedAt: T0,
    });
    // A session of the test's own locks the computation row that b's commit writes last,
    // so b's transaction stops mid-way: after it has updated (and locked) p1.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM computations WHERE id = 'aud_hold' FOR UPDATE`);
    try {
      const fromB = b.commitEngage(batch({ profiles: [write('p1', 1, '"from b"')], computationsLive: [{ id: 'aud_hold', version: 1 }] }));
      await eventually(async () => ((await lockWaiters(db.url)) >= 1 ? true : undefined), 10_000, 'b to wait mid-way');
      // a read p1 at version 1 too; its write queues behind b's row lock on p1.
      const fromA = a.commitEngage(batch({ profiles: [write('p1', 1, '"from a"')] }));
      await eventually(async () => ((await lockWaiters(db.url)) >= 2 ? true : undefined), 10_000, 'a to wait for p1');
      await holder.query('COMMIT');
      assert.deepEqual(await Promise.all([fromB, fromA]), [true, false], 'b commits; a finds the version moved and writes nothing');
    } finally {
      await holder.end();
    }
    const [p1] = await a.getProfiles(['p1']);
    assert.deepEqual([p1?.state, p1?.version], ['"from b"', 2], "b's update is kept");
    // a re-reads and applies its change on top: nothing lost.
    assert.equal(await a.commitEngage(batch({ profiles: [write('p1', 2, '"from b, then a"')] })), true);
    assert.deepEqual((await b.getProfiles(['p1'])).map((p) => [p.state, p.version]), [['"from b, then a"', 3]]);
  });

  it('gives the stream lease to exactly one of two nodes asking at once, and the cursor moves once', { timeout: 30_000 }, async () => {
    const claims = await Promise.all([a.claimEngageLease('node-a', T0, 10_000), b.claimEngageLease('node-b', T0, 10_000)]);
    assert.equal(claims.filter(Boolean).length, 1);
    const moves = await Promise.all([a.commitEngage(batch({ cursor: { from: 0, to: 5, erasures: 0 } })), b.commitEngage(batch({ cursor: { from: 0, to: 5, erasures: 0 } }))]);
    assert.deepEqual(moves.filter(Boolean).length, 1, 'two commits of the same page: one wins');
    assert.equal(await b.getEngageCursor(), 5);
  });
});
