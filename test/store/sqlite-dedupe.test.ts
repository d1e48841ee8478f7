import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DedupeIndex } from '../../src/store/sqlite/dedupe-index.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';

const HOUR = 3_600_000;

describe('SQLite de-duplication index', () => {
  it('finds every pair it holds through many growths, and no pair it does not', () => {
    const index = new DedupeIndex();
    const bySeq = new Map<number, string>();
    const confirm = (pair: string) => (seq: number) => bySeq.get(seq) === pair;
    for (let seq = 1; seq <= 50_000; seq++) {
      bySeq.set(seq, `s${seq % 7}/m${seq}`);
      index.add(`s${seq % 7}`, `m${seq}`, T0, seq);
    }
    assert.equal(index.size, 50_000);
    for (let seq = 1; seq <= 50_000; seq += 97) {
      assert.ok(index.seen(`s${seq % 7}`, `m${seq}`, T0, confirm(`s${seq % 7}/m${seq}`)), `pair ${seq} is found`);
      // The same message id under another source is another pair.
      assert.ok(!index.seen(`s${(seq + 1) % 7}`, `m${seq}`, T0, confirm(`s${(seq + 1) % 7}/m${seq}`)));
    }
    for (let n = 0; n < 1_000; n++) assert.ok(!index.seen('s1', `absent-${n}`, T0, confirm(`s1/absent-${n}`)));
  });

  it('treats a hash match only as a candidate: the stored row decides', () => {
    const index = new DedupeIndex();
    index.add('source', 'message', T0, 42);
    const asked: number[] = [];
    assert.ok(!index.seen('source', 'message', T0, (seq) => (asked.push(seq), false)));
    assert.deepEqual(asked, [42]);
  });

  it('forgets whole hours once they are older than the window', () => {
    const index = new DedupeIndex();
    index.add('s', 'old', T0, 1);
    index.add('s', 'new', T0 + 2 * HOUR, 2);
    const always = (): boolean => true;
    assert.ok(index.seen('s', 'old', T0 - HOUR, always));
    assert.ok(!index.seen('s', 'old', T0 + HOUR + 1, always), 'the hour of T0 has ended by T0 + 1 h');
    assert.equal(index.size, 1);
    assert.ok(index.seen('s', 'new', T0 + HOUR + 1, always));
  });

  it('past its bound, drops the oldest hour first', () => {
    const index = new DedupeIndex(10);
    for (let n = 0; n < 6; n++) index.add('s', `a${n}`, T0, n);
    for (let n = 0; n < 6; n++) index.add('s', `b${n}`, T0 + HOUR, 10 + n);
    assert.equal(index.size, 6);
    const always = (): boolean => true;
    assert.ok(!index.seen('s', 'a0', 0, always));
    assert.ok(index.seen('s', 'b0', 0, always));
  });
});

describe('SQLite store de-duplication across restarts', () => {
  it('rebuilds from the stored messages: ids accepted within the window stay duplicates, older and erased ones do not', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-dedupe-'));
    const open = async (): Promise<SqliteStore> => {
      const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
      await store.migrate();
      return store;
    };
    try {
      let store = await open();
      await addSource(store, 'a');
      const old = storeEntry('a', { messageId: 'old', receivedAt: T0 - 2 * HOUR });
      const recent = storeEntry('a', { messageId: 'recent', receivedAt: T0 });
      const erased = storeEntry('a', { messageId: 'erased', receivedAt: T0, userId: 'to-erase' });
      const filler = Array.from({ length: 300 }, (_, n) => storeEntry('a', { receivedAt: T0 - HOUR + n }));
      await store.appendMessages([old, ...filler, recent, erased], T0 - 3 * HOUR);
      await store.close();

      store = await open();
      const since = T0 - HOUR;
      await store.prepareIngest(since); // as serve does before it listens
      await store.createRegulation({ id: 'r1', regulationType: 'DELETE_ONLY', subjectIds: ['to-erase'], sourceIds: ['a'], stepSourceIds: ['a'], createdAt: T0 });
      assert.ok(await store.runRegulationStep({ regulationId: 'r1', sourceId: 'a', eraseUserIds: ['to-erase'], messages: [], at: T0 }));
      const again = await store.appendMessages(
        [{ ...old, receivedAt: T0 + 1 }, { ...recent, receivedAt: T0 + 1 }, { ...erased, receivedAt: T0 + 1 }, { ...filler[150]!, receivedAt: T0 + 1 }],
        since,
      );
      assert.deepEqual(
        again.map((r) => r.status),
        ['accepted', 'duplicate', 'accepted', 'duplicate'],
        'old: before the window; recent and filler: within it; erased: its row is gone',
      );
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
