import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type pg from 'pg';
import { SseReader } from '../helpers/sse.js';
import { describePostgres, freshDatabase, holdMessageInsert, query, type FreshDatabase } from '../helpers/postgres.js';
import { TEST_ADMIN_TOKEN, eventually, startTestSwitchyard, type TestSwitchyard } from '../helpers/switchyard.js';

/**
 * On PostgreSQL several transactions insert messages at once, and a seq can
 * commit after a higher one. The live debugger pages after the last seq it
 * sent: it used to send the later messages at once, move past the seq still
 * held, and never show that message when it committed.
 */
await describePostgres('The live debugger and a message transaction that commits late (PostgreSQL)', () => {
  let db: FreshDatabase;
  let node: TestSwitchyard | undefined;
  let held: pg.Client | undefined;
  let reader: SseReader | undefined;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    reader?.close();
    await held?.end().catch(() => {});
    await node?.close();
    await db?.drop();
  });

  it('shows a message whose transaction took its seq before later ones and committed after them, in seq order', { timeout: 60_000 }, async () => {
    node = await startTestSwitchyard({ 'database-url': db.url });
    const source = await node.createSource();
    const track = (event: string) => node!.send('/v1/track', source.writeKey, { userId: 'u1', event, messageId: event });
    reader = await SseReader.open(`${node.url}/admin/v1/sources/${source.id}/debugger/stream`, { authorization: `Bearer ${TEST_ADMIN_TOKEN}` });
    assert.equal(reader.response.status, 200);
    await reader.until((b) => b.kind === 'comment' && b.text === 'connected');

    assert.equal((await track('first')).status, 200);
    const [first] = await reader.events(1);
    assert.equal(first!.data.message.event, 'first');

    // The first track again as 'held', in a transaction that stalls before its commit.
    held = await holdMessageInsert(db.url, 'first', { messageId: 'held', event: 'held' });

    // Two more messages commit above the held seq.
    for (const event of ['second', 'third']) assert.equal((await track(event)).status, 200);
    await eventually(
      async () => ((await query<{ n: string }>(db.url, `SELECT count(*) AS n FROM messages WHERE source_id = $1`, [source.id]))[0]!.n === '3' ? true : undefined),
      10_000,
      'the later messages stored',
    );

    await held.query('COMMIT');
    const events = await reader.events(3, 15_000);
    assert.deepEqual(
      events.map((e) => e.data.message.event),
      ['held', 'second', 'third'],
      'the late message too, and every message in seq order',
    );
    const seqs = events.map((e) => Number(e.id));
    assert.deepEqual([...seqs].sort((a, b) => a - b), seqs);
  });
});
