import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it } from 'node:test';
import type pg from 'pg';
import { describePostgres, freshDatabase, holdMessageInsert, type FreshDatabase } from '../helpers/postgres.js';
import { type ReceivedRequest, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { eventually, startTestSwitchyard, type TestSwitchyard } from '../helpers/switchyard.js';

/**
 * On PostgreSQL several transactions insert messages at once, and a seq can
 * commit after a higher one. A replay pages through the source's messages
 * after its cursor: it used to queue the later messages, move past the seq
 * still held, and end without the message that committed late.
 */
await describePostgres('A replay and a message transaction that commits late (PostgreSQL)', () => {
  let db: FreshDatabase;
  let node: TestSwitchyard | undefined;
  let receiver: TestReceiver | undefined;
  let held: pg.Client | undefined;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await held?.end().catch(() => {});
    await node?.close();
    await receiver?.close();
    await db?.drop();
  });

  it('replays a message of its range whose transaction committed after later ones, in seq order', { timeout: 60_000 }, async () => {
    receiver = await startReceiver();
    node = await startTestSwitchyard({ 'database-url': db.url, 'allow-private-receivers': 'true' });
    const source = await node.createSource();
    const put = await node.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const idOf = (request: ReceivedRequest): string => JSON.parse(request.body).messageId as string;
    const replayed = (): string[] => receiver!.requests.filter((r) => r.headers['x-switchyard-replay'] !== undefined).map(idOf);
    const live = (): string[] => receiver!.requests.filter((r) => r.headers['x-switchyard-replay'] === undefined).map(idOf);
    const track = (messageId: string) => node!.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order', messageId });

    const from = new Date().toISOString();
    assert.equal((await track('first')).status, 200);
    await eventually(() => (live().includes('first') ? true : undefined), 10_000, 'the first delivered live');
    // Settled past the first before a writer holds a later seq open: while one does, nothing after
    // what was settled before it began can settle (see SettledSeq), and under load no reader (Engage,
    // the debugger) may have looked in between.
    const [first] = await node.store.listRecentMessages(source.id, 1);
    await eventually(async () => ((await node!.store.settledMessageSeq()).seq >= first!.seq ? true : undefined), 10_000, 'the first settled');
    // The first track again as 'held', in a transaction that stalls before its commit.
    held = await holdMessageInsert(db.url, 'first', { messageId: 'held' });
    for (const id of ['second', 'third']) assert.equal((await track(id)).status, 200);
    await eventually(() => (live().includes('second') && live().includes('third') ? true : undefined), 10_000, 'the later ones delivered live');
    await sleep(5); // `to` after every receivedAt
    const to = new Date().toISOString();

    const created = await node.admin('POST', `/sources/${source.id}/replays`, { from, to });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const status = async (): Promise<string> => (await node!.admin('GET', `/replays/${created.body.id}`)).body.status as string;
    await eventually(() => (replayed().includes('first') ? true : undefined), 10_000, 'the first replayed');
    // Long enough for the replay to have queued the later ones and ended, had it gone past the held seq.
    await sleep(1_500);
    assert.deepEqual(replayed(), ['first'], 'nothing past the seq still held');
    assert.equal(await status(), 'running');

    await held.query('COMMIT');
    await eventually(async () => ((await status()) === 'done' ? true : undefined), 15_000, 'the replay to finish');
    await eventually(() => (replayed().length >= 4 ? true : undefined), 10_000, 'every replayed delivery');
    assert.deepEqual(replayed(), ['first', 'held', 'second', 'third'], 'the late message too, in seq order');
  });
});
