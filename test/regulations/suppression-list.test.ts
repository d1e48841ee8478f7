import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RegulationType } from '../../src/domain/regulation.js';
import { SuppressionList } from '../../src/regulations/suppression-list.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { addSource, T0 } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

/**
 * What a SuppressionList reads, counted in rows (its `rowsRead`), not timed:
 * a config change that is not a suppression reads none, one suppressed user
 * reads one, and every node (a second store on the same PostgreSQL database)
 * applies new suppressions and lifts.
 */
let counter = 0;
const regulate = async (store: Store, type: RegulationType, subjectIds: string[], sourceIds?: string[]): Promise<string> => {
  const id = `reg_list_${++counter}`;
  await store.createRegulation({ id, regulationType: type, subjectIds, sourceIds, stepSourceIds: sourceIds ?? [], createdAt: T0 + counter });
  return id;
};
/** Stopped before their store closes. */
const lists: SuppressionList[] = [];
const listOn = async (store: Store): Promise<SuppressionList> => {
  const list = new SuppressionList(store, { pollMs: 100, onError: (error) => assert.fail(String(error)) });
  lists.push(list);
  await list.start();
  return list;
};
const incremental = (open: () => Promise<{ a: Store; b: Store; close: () => Promise<void> }>): void => {
  let a: Store;
  let b: Store;
  let close: () => Promise<void>;
  before(async () => {
    ({ a, b, close } = await open());
  });
  after(() => close());

  it('reads only the suppression rows that changed, not all of them, on any config change', async () => {
    await addSource(a, 'src_1');
    await addSource(a, 'src_2');
    const many = Array.from({ length: 5_000 }, (_, i) => `many-${i}`);
    const bulk = await regulate(a, 'SUPPRESS_ONLY', many, ['src_1', 'src_2']);
    // 10,000 rows: a first load (a restart) reads them in pages, and holds them all.
    const list = await listOn(a);
    assert.equal(list.rowsRead, 10_000);
    assert.equal(list.regulationFor('src_2', 'many-4999'), bulk);
    assert.equal(list.regulationFor('src_3', 'many-4999'), undefined);

    await a.updateSource('src_1', { name: 'renamed' }, T0);
    await list.reload();
    assert.equal(list.configVersion, await a.getConfigVersion(), 'current with the config');
    assert.equal(list.rowsRead, 10_000, 'a source renamed reads no suppression');

    const one = await regulate(a, 'SUPPRESS_ONLY', ['alice']);
    await list.reload();
    assert.equal(list.rowsRead, 10_001, 'one new suppressed user: one row');
    assert.equal(list.regulationFor('src_9', 'alice'), one);

    const lift = await regulate(a, 'UNSUPPRESS', ['many-0', 'alice']);
    await list.reload();
    assert.equal(list.rowsRead, 10_004, 'a lift reads the rows it lifted');
    assert.equal(list.regulationFor('src_1', 'many-0'), undefined);
    assert.equal(list.regulationFor('src_1', 'alice'), undefined);
    assert.equal(list.regulationFor('src_1', 'many-1'), bulk);
    assert.ok(lift);

    // Another node (on SQLite, another list over the same file) follows: by the config feed, without a reload asked.
    const other = await listOn(b);
    const bob = await regulate(a, 'SUPPRESS_ONLY', ['bob'], ['src_2']);
    await eventually(() => (other.regulationFor('src_2', 'bob') === bob ? true : undefined), 10_000, 'the other node to suppress bob');
    assert.equal(other.regulationFor('src_1', 'bob'), undefined);
    await regulate(a, 'UNSUPPRESS', ['bob'], ['src_2']);
    await eventually(() => (other.regulationFor('src_2', 'bob') === undefined ? true : undefined), 10_000, 'the other node to lift bob');
    const read = other.rowsRead;
    await a.updateSource('src_2', { name: 'renamed too' }, T0);
    await eventually(async () => (other.configVersion === (await a.getConfigVersion()) ? true : undefined), 10_000, 'the other node to follow the config');
    assert.equal(other.rowsRead, read, 'and reads no suppression for it');

    // A restart reads what is in force: lifted rows stay lifted.
    const restarted = await listOn(b);
    assert.equal(restarted.regulationFor('src_1', 'many-0'), undefined);
    assert.equal(restarted.regulationFor('src_2', 'bob'), undefined);
    assert.equal(restarted.regulationFor('src_1', 'many-1'), bulk);
  });
};

void describe('SuppressionList on SQLite', () => {
  incremental(async () => {
    const store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
    await store.migrate();
    return {
      a: store,
      b: store,
      close: async () => {
        for (const list of lists.splice(0)) list.stop();
        await store.close();
      },
    };
  });
});

await describePostgres('SuppressionList on PostgreSQL, two nodes', () => {
  let db: FreshDatabase;
  incremental(async () => {
    db = await freshDatabase();
    const a = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    const b = PostgresStore.open({ databaseUrl: db.url, durability: 'process' });
    await a.migrate();
    await b.migrate();
    return {
      a,
      b,
      close: async () => {
        for (const list of lists.splice(0)) list.stop();
        await Promise.all([a.close(), b.close()]);
        await db.drop();
      },
    };
  });
});
