import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { BacklogFullError, GroupCommitter } from '../../src/ingest/group-commit.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { NewRawRequest, Store } from '../../src/store/store.js';
import { T0, addSource } from '../helpers/store-fixtures.js';

/**
 * A real SQLite store whose commits wait until `release()`: the committer's
 * queue fills exactly as when the disk is slower than the clients.
 */
function heldStore(store: SqliteStore): { store: Store; entered: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let enter!: () => void;
  const entered = new Promise<void>((resolve) => (enter = resolve));
  const held = new Proxy(store, {
    get(target, property) {
      if (property === 'appendRawRequests') {
        return async (requests: readonly NewRawRequest[]) => {
          enter();
          await gate;
          return target.appendRawRequests(requests);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: held, entered, release };
}

/** One raw request holding `count` messages, told apart by `id` (padded to `pad` characters). */
function entries(count: number, id: string, pad?: string): NewRawRequest {
  const body = JSON.stringify({ id, batch: [], pad: pad ?? '' });
  return { sourceId: 's', route: 'batch', receivedAt: T0, ip: undefined, configVersion: 0, messageCount: count, headers: undefined, body };
}

describe('ingest admission control (GroupCommitter backlog bound)', () => {
  let sqlite: SqliteStore;
  beforeEach(async () => {
    sqlite = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
    await sqlite.migrate();
    await addSource(sqlite, 's');
  });
  afterEach(async () => {
    await sqlite.close();
  });

  /** The ids of the raw requests stored, and the messages they hold (taking them out of the store). */
  const stored = async (): Promise<{ ids: Set<string>; messages: number }> => {
    const ids = new Set<string>();
    let messages = 0;
    await sqlite.processRawRequests(
      { maxRequests: 1e6, maxMessages: 1e9 },
      (rows) =>
        rows.map((row) => {
          ids.add((JSON.parse(row.body) as { id: string }).id);
          messages += row.messageCount;
          return [];
        }),
      0,
    );
    return { ids, messages };
  };

  it('refuses at once, storing nothing, past the bound in messages; admits again once drained', async () => {
    const { store, entered, release } = heldStore(sqlite);
    const committer = new GroupCommitter(store, { maxEntries: 10, maxBacklog: 30, maxBacklogBytes: 1e9, maxBacklogRequests: 1_000 });
    const inCommit = committer.commit(entries(5, 'first'));
    await entered;
    // The first commit is held; the next 30 messages wait, up to the bound.
    const admitted = Array.from({ length: 6 }, (_, i) => committer.commit(entries(5, `queued${i}`)));
    assert.equal(committer.backlog, 30);
    assert.equal(committer.full, true);

    const refusedAt = performance.now();
    await assert.rejects(committer.commit(entries(1, 'refused')), BacklogFullError);
    assert.ok(performance.now() - refusedAt < 50, 'refused at once, not after the held commit');
    assert.equal(committer.backlog, 30, 'a refused request adds nothing to the backlog');

    release();
    await Promise.all([inCommit, ...admitted]);
    assert.equal(committer.backlog, 0);
    assert.equal(committer.full, false);
    const first = await stored();
    assert.deepEqual([first.ids.size, first.messages], [7, 35]);
    assert.equal(first.ids.has('refused'), false, 'a refused request is never stored');

    await committer.commit(entries(3, 'later'));
    assert.deepEqual([...(await stored()).ids], ['later']);
  });

  it('refuses past the bound in bytes, and never refuses a request for its size alone', async () => {
    const { store, entered, release } = heldStore(sqlite);
    const big = 'x'.repeat(1_000);
    const committer = new GroupCommitter(store, { maxEntries: 100, maxBacklog: 1_000, maxBacklogBytes: 3 * (big.length + 30), maxBacklogRequests: 1_000 });
    const inCommit = committer.commit(entries(1, 'first', big));
    await entered;
    // An empty queue takes a request over both bounds: it could not get in otherwise.
    const huge = committer.commit(entries(1_500, 'huge'));
    assert.equal(committer.full, true);
    await assert.rejects(committer.commit(entries(1, 'refused', big)), BacklogFullError);
    release();
    await Promise.all([inCommit, huge]);

    const bytes = heldStore(sqlite);
    const bounded = new GroupCommitter(bytes.store, { maxEntries: 100, maxBacklog: 1_000, maxBacklogBytes: 3 * (big.length + 30), maxBacklogRequests: 1_000 });
    const held = bounded.commit(entries(1, 'held', big));
    await bytes.entered;
    const admitted = [bounded.commit(entries(2, 'a', big + big)), bounded.commit(entries(1, 'b', big))];
    await assert.rejects(bounded.commit(entries(1, 'c', big)), BacklogFullError);
    bytes.release();
    await Promise.all([held, ...admitted]);

    const all = await stored();
    assert.equal(all.messages, 1 + 1_500 + 1 + 2 + 1);
    assert.equal(all.ids.has('refused') || all.ids.has('c'), false);
  });

  it('refuses past the bound in requests, however few messages they hold', async () => {
    const { store, entered, release } = heldStore(sqlite);
    const committer = new GroupCommitter(store, { maxEntries: 100, maxBacklog: 1_000, maxBacklogBytes: 1e9, maxBacklogRequests: 4 });
    const inCommit = committer.commit(entries(1, 'first'));
    await entered;
    const admitted = Array.from({ length: 4 }, (_, i) => committer.commit(entries(1, `call${i}`)));
    assert.equal(committer.full, true);
    await assert.rejects(committer.commit(entries(1, 'refused')), BacklogFullError);
    release();
    await Promise.all([inCommit, ...admitted]);
    const all = await stored();
    assert.equal(all.ids.size, 5);
    assert.equal(all.ids.has('refused'), false);
  });
});
