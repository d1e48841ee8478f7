import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it } from 'node:test';
import type pg from 'pg';
import { describePostgres, freshDatabase, holdMessageInsert, query, type FreshDatabase } from '../helpers/postgres.js';
import { eventually, startTestSwitchyard, type TestSwitchyard } from '../helpers/switchyard.js';

/**
 * On PostgreSQL several transactions insert messages at once, and a seq can
 * commit after a higher one. Engage reads the stream in seq order and moves
 * its cursor past what it read: it must not pass a seq whose transaction is
 * still running, however long that takes (a stalled fsync, a lock wait).
 * It used to wait 3 s at a gap and then go past it for good.
 */
await describePostgres('Engage and a message transaction that commits late (PostgreSQL)', () => {
  let db: FreshDatabase;
  let node: TestSwitchyard | undefined;
  let held: pg.Client | undefined;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await held?.end().catch(() => {});
    await node?.close();
    await db?.drop();
  });

  it('counts a message whose transaction took its seq before later ones and committed seconds after them', { timeout: 60_000 }, async () => {
    node = await startTestSwitchyard({ 'database-url': db.url });
    const source = await node.createSource();
    const trait = await node.admin('POST', '/computed-traits', { name: 'Orders', definition: { type: 'event_counter', event: 'Order' }, destinations: [] });
    assert.equal(trait.status, 201, JSON.stringify(trait.body));
    await eventually(async () => ((await node!.admin('GET', `/computed-traits/${trait.body.id}`)).body.status === 'live' ? true : undefined), 10_000, 'live');
    const orders = async (): Promise<number | undefined> => {
      const profile = await node!.admin('GET', '/profiles/user_id:u1');
      return profile.status === 200 ? (profile.body.computedTraits?.orders as number | undefined) : undefined;
    };
    const order = (n: number) => node!.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order', messageId: `order-${n}` });

    assert.equal((await order(1)).status, 200);
    await eventually(async () => ((await orders()) === 1 ? true : undefined), 10_000, 'the first order counted');

    // Order 1 again under another messageId, in a transaction that stalls before its commit.
    held = await holdMessageInsert(db.url, 'order-1', { messageId: 'order-held' });

    // Three more orders commit above the held seq.
    for (const n of [2, 3, 4]) assert.equal((await order(n)).status, 200);
    await eventually(async () => ((await query<{ n: string }>(db.url, `SELECT count(*) AS n FROM messages`))[0]!.n === '4' ? true : undefined), 10_000, 'the later orders stored');
    // Longer than the 3 s Engage used to wait at a gap before going past it.
    await sleep(4_500);
    assert.equal(await orders(), 1, 'Engage has not gone past the seq still held');

    await held.query('COMMIT');
    await eventually(async () => ((await orders()) === 5 ? true : undefined), 15_000, 'all five orders counted, the late one too');
  });
});
