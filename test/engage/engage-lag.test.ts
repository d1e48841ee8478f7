import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { engageLagReader } from '../../src/engage/engage-lag.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { describePostgres, freshDatabase, query, type FreshDatabase } from '../helpers/postgres.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';
import { eventually, startTestSwitchyard, type TestSwitchyard } from '../helpers/switchyard.js';

/**
 * `switchyard_engage_lag_seconds`: how long the oldest stored message the
 * Engage evaluator has not applied yet has waited. The store names that
 * message (Store.oldestUnevaluatedMessage, in the engage store contract);
 * the reader turns it into seconds; `/metrics` serves it.
 */
describe('engageLagReader', () => {
  it('keeps its last value and reports the error when the store cannot answer', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'engage-lag-'));
    const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
    try {
      await store.migrate();
      await addSource(store, 'src');
      await store.appendMessages([storeEntry('src', { receivedAt: T0, destinations: [] })], 0);
      const errors: unknown[] = [];
      const read = engageLagReader(store, () => T0 + 5_000, (error) => errors.push(error));
      assert.equal(await read(), 5);
      await store.close();
      assert.equal(await read(), 5, 'the scrape still gets the last value');
      assert.equal(errors.length, 1, 'and the error is reported');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** The gauge's value in a `/metrics` text, or undefined when it is not there. */
async function scrapeLag(node: TestSwitchyard): Promise<number | undefined> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('switchyard_engage_lag_seconds '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe('switchyard_engage_lag_seconds on /metrics (SQLite)', () => {
  let node: TestSwitchyard;
  before(async () => {
    node = await startTestSwitchyard();
  });
  after(async () => node?.close());

  it('is served, and reads 0 once Engage has applied what was sent', async () => {
    const source = await node.createSource();
    assert.equal((await node.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Signed Up' })).status, 200);
    await eventually(async () => ((await scrapeLag(node)) === 0 ? true : undefined), 15_000, 'the lag back at 0');
  });
});

await describePostgres('switchyard_engage_lag_seconds on /metrics (PostgreSQL)', () => {
  let db: FreshDatabase;
  let node: TestSwitchyard | undefined;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await node?.close();
    await db?.drop();
  });

  it('grows while another node holds the Engage lease and does nothing, and falls to 0 once it is free', async () => {
    // A first start creates the schema; stopped cleanly, it leaves the lease free.
    await (await startTestSwitchyard({ 'database-url': db.url })).close();
    // A node that holds the lease for an hour and evaluates nothing (its session is not recorded, so no one can tell it is gone).
    await query(db.url, `UPDATE engage_state SET lease_owner = 'elsewhere', lease_expires_at = $1, lease_backend = NULL WHERE id = 1`, [Date.now() + 3_600_000]);
    node = await startTestSwitchyard({ 'database-url': db.url });
    const source = await node.createSource();
    assert.equal((await node.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Signed Up' })).status, 200);
    const first = await eventually(async () => {
      const lag = await scrapeLag(node!);
      return lag !== undefined && lag > 0 ? lag : undefined;
    }, 10_000, 'a lag above 0');
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const later = await scrapeLag(node);
    assert.ok(later !== undefined && later >= first + 1, `the lag grows while nothing is evaluated (${first} s, then ${later} s)`);

    await query(db.url, `UPDATE engage_state SET lease_owner = NULL, lease_expires_at = 0 WHERE id = 1 AND lease_owner = 'elsewhere'`);
    await eventually(async () => ((await scrapeLag(node!)) === 0 ? true : undefined), 20_000, 'the lag back at 0 once the lease is free');
  });
});
