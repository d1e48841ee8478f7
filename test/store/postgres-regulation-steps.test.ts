import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase, query } from '../helpers/postgres.js';
import { addSource, storeEntry, T0 } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

/** How many of the stores' sessions (not the test's own) wait for a row lock in `url`'s database. */
async function lockWaiters(url: string): Promise<number> {
  const [row] = await query<{ n: number }>(
    url,
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND application_name = 'switchyard' AND wait_event_type = 'Lock'`,
  );
  return row!.n;
}

/**
 * Locks a regulation's row from a session of its own, as a step of it
 * finishing on another node does, until `release()`. Steps that run
 * meanwhile claim their rows and erase, then wait for this lock, so they all
 * end at once when it goes.
 */
async function holdRegulationRow(url: string, id: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT 1 FROM regulations WHERE id = $1 FOR UPDATE', [id]);
  } catch (error) {
    await client.end();
    throw error;
  }
  let released: Promise<void> | undefined;
  return {
    release: () => (released ??= client.query('COMMIT').then(() => client.end())),
  };
}

/**
 * Regulation steps on PostgreSQL where only a shared store can go wrong:
 * two stores on one database stand for two nodes, each with its own pool.
 * (What every adapter must do is in regulations-contract.ts.)
 */
await describePostgres('PostgreSQL regulation steps on several nodes', () => {
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

  it('runs a step once when two nodes race for it: one call resolves true, one delete message per user', { timeout: 60_000 }, async () => {
    await addSource(a, 'src_race');
    const users = ['racer-1', 'racer-2'];
    await a.appendMessages(users.flatMap((userId) => [storeEntry('src_race', { userId }), storeEntry('src_race', { userId })]), 0);
    await a.createRegulation({ id: 'reg_race', regulationType: 'DELETE_ONLY', subjectIds: users, sourceIds: undefined, stepSourceIds: ['src_race'], createdAt: T0 });
    const run = (store: Store): Promise<boolean> =>
      store.runRegulationStep({
        regulationId: 'reg_race',
        sourceId: 'src_race',
        eraseUserIds: users,
        messages: users.map((userId) => storeEntry('src_race', { userId, type: 'delete', body: JSON.stringify({ type: 'delete', userId }) })),
        at: T0 + 1,
      });

    // Holding the request's row keeps the winner's transaction open until
    // every other call is queued behind its claim.
    const hold = await holdRegulationRow(db.url, 'reg_race');
    let runs: Array<Promise<boolean>> = [];
    try {
      runs = [a, a, a, b, b, b].map(run);
      await eventually(async () => ((await lockWaiters(db.url)) === runs.length ? true : undefined), 10_000, 'every call to wait');
    } finally {
      await hold.release();
    }
    const results = await Promise.all(runs);
    assert.equal(results.filter(Boolean).length, 1, `results: ${results.join(', ')}`);

    const left = await a.listMessagesAfter('src_race', 0, 100);
    assert.deepEqual(left.map((m) => [m.userId, m.type]).sort(), users.map((userId) => [userId, 'delete']));
    const jobs = await a.listDeliveries({ sourceId: 'src_race', limit: 100 });
    const bySeq = (x: number, y: number): number => x - y;
    assert.deepEqual(jobs.map((d) => d.messageSeq).sort(bySeq), left.map((m) => m.seq).sort(bySeq), 'one job per delete message, none of the erased');
    assert.equal((await b.getRegulation('reg_race'))?.status, 'FINISHED');
  });

  it('sets a request FINISHED when its last two steps end at once on two nodes', { timeout: 60_000 }, async () => {
    const sources = ['src_both_1', 'src_both_2'];
    for (const id of sources) await addSource(a, id);
    await a.appendMessages(sources.map((id) => storeEntry(id, { userId: 'both' })), 0);
    await a.createRegulation({ id: 'reg_both', regulationType: 'DELETE_ONLY', subjectIds: ['both'], sourceIds: undefined, stepSourceIds: sources, createdAt: T0 });

    // Both steps claim their rows before either counts them: without the
    // lock on the request's row, each would count the other PENDING and
    // leave the request RUNNING for good.
    const hold = await holdRegulationRow(db.url, 'reg_both');
    let runs: Array<Promise<boolean>> = [];
    try {
      runs = [a, b].map((store, i) =>
        store.runRegulationStep({ regulationId: 'reg_both', sourceId: sources[i]!, eraseUserIds: ['both'], messages: [], at: T0 + 10 + i }),
      );
      await eventually(async () => ((await lockWaiters(db.url)) === 2 ? true : undefined), 10_000, 'both steps to wait');
    } finally {
      await hold.release();
    }
    assert.deepEqual(await Promise.all(runs), [true, true]);
    const detail = await a.getRegulation('reg_both');
    assert.equal(detail?.status, 'FINISHED');
    assert.deepEqual(detail?.sources.map((s) => s.status), ['FINISHED', 'FINISHED']);
    for (const id of sources) assert.deepEqual(await b.listMessagesAfter(id, 0, 10), []);
  });

  it('runs a request for 5,000 users: suppresses them all, erases their messages, stores and queues 5,000 deletes', { timeout: 60_000 }, async () => {
    await addSource(a, 'src_big');
    const users = Array.from({ length: 5_000 }, (_, i) => `big-${i}`);
    const others = Array.from({ length: 50 }, (_, i) => `kept-${i}`);
    await a.appendMessages([...users, ...users, ...others].map((userId) => storeEntry('src_big', { userId })), 0);
    await a.createRegulation({ id: 'reg_big', regulationType: 'SUPPRESS_WITH_DELETE', subjectIds: users, sourceIds: undefined, stepSourceIds: ['src_big'], createdAt: T0 });
    assert.equal((await b.listSuppressions()).filter((s) => s.regulationId === 'reg_big' && s.sourceId === undefined).length, users.length);
    assert.deepEqual((await b.getRegulation('reg_big'))?.subjectIds, users, 'in the order given');

    const ran = await b.runRegulationStep({
      regulationId: 'reg_big',
      sourceId: 'src_big',
      eraseUserIds: users,
      messages: users.map((userId) => storeEntry('src_big', { userId, type: 'delete', body: JSON.stringify({ type: 'delete', userId }), receivedAt: T0 + 1 })),
      at: T0 + 1,
    });
    assert.equal(ran, true);
    const left = await a.listMessagesAfter('src_big', 0, 20_000);
    assert.deepEqual(
      left.filter((m) => m.type === 'track').map((m) => m.userId),
      others,
      'only the other users\' messages stay',
    );
    const deletes = left.filter((m) => m.type === 'delete');
    assert.deepEqual(deletes.map((m) => m.userId), users, 'one delete per user, in order');
    const jobs = await a.listDeliveries({ sourceId: 'src_big', limit: 20_000 });
    assert.equal(jobs.length, others.length + users.length, 'the erased messages\' jobs went');
    const deleteSeqs = new Set(deletes.map((m) => m.seq));
    assert.equal(jobs.filter((d) => deleteSeqs.has(d.messageSeq) && d.status === 'pending').length, users.length);
    assert.equal((await a.getRegulation('reg_big'))?.status, 'FINISHED');
  });

  it('erases and suppresses a user id holding U+0000, stored as U+FFFD as messages.user_id is', { timeout: 60_000 }, async () => {
    await addSource(a, 'src_nul_user');
    await a.appendMessages([storeEntry('src_nul_user', { userId: 'nul\u0000user' })], 0);
    await a.createRegulation({ id: 'reg_nul', regulationType: 'SUPPRESS_WITH_DELETE', subjectIds: ['nul\u0000user'], sourceIds: ['src_nul_user'], stepSourceIds: ['src_nul_user'], createdAt: T0 });
    assert.ok((await a.listSuppressions()).some((s) => s.regulationId === 'reg_nul' && s.userId === 'nul\uFFFDuser'));
    assert.equal(await a.runRegulationStep({ regulationId: 'reg_nul', sourceId: 'src_nul_user', eraseUserIds: ['nul\u0000user'], messages: [], at: T0 }), true);
    assert.deepEqual(await a.listMessagesAfter('src_nul_user', 0, 10), []);
  });
});
