/**
 * Ordered delivery keeps each key's latest delivery (its "tail") so that
 * the key's next message finds what to wait behind by primary key. A tail
 * whose delivery has ended holds nobody back: the pruner forgets it, or the
 * table would keep a row for every user ever seen. A tail whose delivery is
 * still pending must stay, and the key's next message must still wait.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-store.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { listDeliveries } from '../helpers/webhooks.js';

const RETRIES = { 'allow-private-receivers': 'true', 'retry-base-ms': '50', 'retry-max-delay-ms': '200', 'retry-window-ms': '600000' };

function suite(flags: () => Record<string, string>, tailKeys: (sy: TestSwitchyard) => Promise<string[]>): void {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  before(async () => {
    sy = await startTestSwitchyard({ ...RETRIES, ...flags() });
    receiver = await startReceiver();
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('forgets the keys whose last delivery ended and keeps a waiting one', { timeout: 60_000 }, async () => {
    receiver.reply = (request) => ((JSON.parse(request.body) as { userId: string }).userId === 'held' ? { status: 503 } : { status: 200 });
    const source = await sy.createSource('tails');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }], ordering: 'user' } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const track = (userId: string, n: number): Record<string, unknown> => ({ type: 'track', event: 'E', userId, properties: { n } });
    await sy.send('/v1/batch', source.writeKey, { batch: [track('a', 1), track('b', 1), track('held', 1)] });
    await eventually(async () => {
      const succeeded = await listDeliveries(sy, source.id, 'succeeded');
      return succeeded.length === 2 && receiver.requests.some((r) => r.body.includes('"held"')) ? true : undefined;
    }, 20_000, 'a and b delivered, held tried');
    assert.deepEqual((await tailKeys(sy)).sort(), ['a', 'b', 'held'], 'one tail per key before the prune');

    await sy.store.prune(0, 0); // a cut in the past: no message is old enough to go, only ended tails
    assert.deepEqual(await tailKeys(sy), ['held'], 'only the key whose delivery is still pending keeps its tail');

    // The kept tail still holds the key's next message back; a pruned key's next one goes at once.
    await sy.send('/v1/batch', source.writeKey, { batch: [track('held', 2), track('a', 2)] });
    const pending = await eventually(async () => {
      const listed = await listDeliveries(sy, source.id, 'pending');
      return listed.length === 2 ? listed.sort((x: any, y: any) => x.id - y.id) : undefined;
    }, 20_000, 'the second message of held queued');
    const second = (await sy.admin('GET', `/deliveries/${pending[1].id}`)).body;
    assert.equal(second.waitingFor, pending[0].id, 'held\'s second message waits behind its first');
    await eventually(async () => ((await listDeliveries(sy, source.id, 'succeeded')).length === 3 ? true : undefined), 20_000, 'a\'s second message delivered');
  });
}

describe('ordered delivery tails are pruned (SQLite)', () => {
  suite(
    () => ({}),
    async (sy) => {
      const db = new Database(path.join(sy.dataDir, SQLITE_FILE), { readonly: true, fileMustExist: true });
      try {
        return db.prepare('SELECT order_key FROM delivery_tails').pluck().all() as string[];
      } finally {
        db.close();
      }
    },
  );
});

await describePostgres('ordered delivery tails are pruned (PostgreSQL)', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  suite(
    () => ({ 'database-url': db.url }),
    async () => {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        return (await client.query<{ order_key: string }>('SELECT order_key FROM delivery_tails')).rows.map((r) => r.order_key);
      } finally {
        await client.end();
      }
    },
  );
});
