import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { migrate as migrateSqlite } from '../../src/store/sqlite/migrations.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { NewRawRequest, RawBacklog, Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase } from '../helpers/postgres.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';

/** SQLite's schema version before the running totals of raw requests (a fixed number: later migrations append). */
const BEFORE_RUNNING_TOTALS = 21;

/**
 * The unprocessed backlog (`rawBacklog`: what ingest's 503 bound and the
 * processing-lag gauge read every 200 ms) against a count of what is really
 * there, through appends, partial processing, a deleted source's rows and an
 * emptied table. SQLite reads it from each row's running total instead of
 * scanning; PostgreSQL counts.
 */

function raw(sourceId: string, n: number, messageCount: number): NewRawRequest {
  return { sourceId, route: messageCount > 1 ? 'batch' : 'track', receivedAt: T0 + n, ip: undefined, configVersion: 1, messageCount, headers: undefined, body: JSON.stringify({ n }) };
}

const build = (rows: readonly { sourceId: string; receivedAt: number; body: string }[]) =>
  rows.map((row) => [storeEntry(row.sourceId, { receivedAt: row.receivedAt, body: row.body, destinations: [] })]);

/** Appends, processes and deletes at random; after each step the backlog matches what is left. */
async function checkAgainstCount(store: Store, seed: number): Promise<void> {
  const next = seededRandom(seed);
  await addSource(store, 'keep');
  // What is unprocessed, oldest first, as [source, messages, receivedAt].
  let left: Array<{ source: string; messages: number; receivedAt: number }> = [];
  let n = 0;
  let doomed = 0;
  const created = new Set<string>();
  const expected = (): RawBacklog => ({
    requests: left.length,
    messages: left.reduce((sum, r) => sum + r.messages, 0),
    oldestReceivedAt: left[0]?.receivedAt,
  });
  for (let step = 0; step < 60; step++) {
    const action = next();
    if (action < 0.55) {
      const requests: NewRawRequest[] = [];
      for (let i = Math.floor(next() * 5) + 1; i > 0; i--) {
        const source = next() < 0.2 ? `doomed-${doomed}` : 'keep';
        if (source !== 'keep' && !created.has(source)) {
          await addSource(store, source);
          created.add(source);
        }
        const request = raw(source, ++n, next() < 0.3 ? Math.floor(next() * 100) + 2 : 1);
        requests.push(request);
        left.push({ source, messages: request.messageCount, receivedAt: request.receivedAt });
      }
      await store.appendRawRequests(requests);
    } else if (action < 0.9) {
      const maxRequests = Math.floor(next() * 4) + 1;
      const processed = await store.processRawRequests({ maxRequests, maxMessages: 10_000 }, build, 0);
      left = left.slice(processed.requests);
    } else {
      // A source deleted with its raw requests wherever they are in the queue.
      const source = `doomed-${doomed++}`;
      if (left.some((r) => r.source === source)) {
        await store.deleteSource(source);
        left = left.filter((r) => r.source !== source);
      }
    }
    const backlog = await store.rawBacklog();
    const truth = expected();
    // A deleted source's rows in the middle are counted until processing passes them (never fewer).
    const hole = left.length > 0 && backlog.requests > truth.requests;
    if (hole) {
      assert.ok(backlog.messages >= truth.messages, `step ${step}: ${JSON.stringify(backlog)} against ${JSON.stringify(truth)}`);
      assert.equal(backlog.oldestReceivedAt, truth.oldestReceivedAt, `step ${step}: the oldest`);
    } else {
      assert.deepEqual(backlog, truth, `step ${step}`);
    }
  }
  // Processing past every gap makes it exact again, and an emptied table reads zero.
  for (;;) if ((await store.processRawRequests({ maxRequests: 3, maxMessages: 10_000 }, build, 0)).requests === 0) break;
  assert.deepEqual(await store.rawBacklog(), { requests: 0, messages: 0, oldestReceivedAt: undefined });
  await store.appendRawRequests([raw('keep', ++n, 7), raw('keep', ++n, 1)]);
  assert.deepEqual(await store.rawBacklog(), { requests: 2, messages: 8, oldestReceivedAt: T0 + n - 1 });
}

void describe('the raw backlog: sqlite', () => {
  for (const seed of [1, 2, 3]) {
    void it(`matches what is left through appends, processing and deleted sources (seed ${seed})`, async () => {
      const store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
      await store.migrate();
      try {
        await checkAgainstCount(store, seed);
      } finally {
        await store.close();
      }
    });
  }

  void it('counts the raw requests stored before the upgrade that added running totals', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raw-backlog-migration-'));
    try {
      const db = new BetterSqlite3(path.join(dir, SQLITE_FILE));
      migrateSqlite(db, BEFORE_RUNNING_TOTALS);
      db.exec(`INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES ('s', 's', 'key', 'hash', 1, ${T0}, ${T0})`);
      for (const [n, count] of [[1, 1], [2, 40], [3, 1], [4, 5]] as const) {
        db.prepare(`INSERT INTO raw_requests (source_id, route, received_at, ip, config_version, message_count, headers, body) VALUES ('s', 'batch', ?, NULL, 1, ?, NULL, '{}')`).run(T0 + n, count);
      }
      db.close();
      const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
      try {
        await store.migrate();
        assert.deepEqual(await store.rawBacklog(), { requests: 4, messages: 47, oldestReceivedAt: T0 + 1 });
        await store.appendRawRequests([raw('s', 5, 3)]);
        assert.deepEqual(await store.rawBacklog(), { requests: 5, messages: 50, oldestReceivedAt: T0 + 1 }, 'a new row continues the migrated totals');
        assert.equal((await store.processRawRequests({ maxRequests: 2, maxMessages: 10_000 }, build, 0)).requests, 2);
        assert.deepEqual(await store.rawBacklog(), { requests: 3, messages: 9, oldestReceivedAt: T0 + 3 });
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

await describePostgres('the raw backlog: postgres', () => {
  void it('matches what is left through appends, processing and deleted sources (seed 1)', async () => {
    const fresh = await freshDatabase();
    const store = PostgresStore.open({ databaseUrl: fresh.url, durability: 'process' });
    try {
      await store.migrate();
      await checkAgainstCount(store, 1);
    } finally {
      await store.close();
      await fresh.drop();
    }
  });
});
