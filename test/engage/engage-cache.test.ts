import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { EngageRunner } from '../../src/engage/engage-runner.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { IngestEntry } from '../../src/store/store.js';
import { T0 } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

const ORDERS = 'ct_orders';

/**
 * The evaluator keeps the profiles it wrote in memory (src/engage/profile-cache.ts).
 * Two runners on one store stand for two nodes; their clocks are set by hand
 * so that the lease moves between them when the test says.
 */
describe('Engage profile cache', () => {
  let dir: string;
  let store: SqliteStore;
  let seq = 0;
  const runners: EngageRunner[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'engage-cache-'));
    store = SqliteStore.open({ dataDir: dir, durability: 'process' });
    await store.migrate();
    await store.insertComputation({
      id: ORDERS, kind: 'trait', name: 'Orders', key: 'orders', definition: { type: 'event_counter', event: 'Order Completed' },
      destinations: [], status: 'live', version: 1, createdAt: T0, updatedAt: T0,
    });
  });
  afterEach(async () => {
    for (const runner of runners.splice(0)) await runner.stop();
  });
  after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** A runner whose clock reads `clock.now`; it only works when woken (its poll is long). */
  function runner(owner: string, clock: { now: number }): EngageRunner {
    const created = new EngageRunner({ store, owner, now: () => clock.now, newMessageId: () => `sync-${owner}-${++seq}`, pollMs: 60_000, onError: (error) => {
      throw error;
    } });
    runners.push(created);
    return created;
  }

  async function order(userId: string): Promise<number> {
    const n = ++seq;
    const iso = new Date(T0).toISOString();
    const entry: IngestEntry = {
      sourceId: 'src', status: 'accepted', type: 'track', messageId: `m-${n}`, userId, receivedAt: T0, destinations: [],
      body: JSON.stringify({ type: 'track', event: 'Order Completed', userId, messageId: `m-${n}`, properties: {}, timestamp: iso }),
    };
    const [result] = await store.appendMessages([entry], 0);
    return result!.seq;
  }

  /** Wakes the runner until it has applied everything up to `seq` (a refused commit is retried by the next wake). */
  async function applied(engage: EngageRunner, seq: number): Promise<void> {
    await eventually(async () => {
      if ((await store.getEngageCursor()) >= seq) return true;
      engage.wake();
      return undefined;
    }, 10_000, `the cursor at ${seq}`);
  }

  async function orders(userId: string): Promise<unknown> {
    const ids = await store.findProfileIds([`user_id:${userId}`]);
    const [profile] = await store.getProfiles([...ids.values()]);
    return profile?.outputs[ORDERS];
  }

  it('loses no update when the lease moves to another node and back', async () => {
    const clockA = { now: T0 };
    const clockB = { now: T0 };
    const a = runner('node-a', clockA);
    const b = runner('node-b', clockB);
    await applied(a, await order('moving'));
    assert.equal(await orders('moving'), 1);
    // A stops renewing; once its lease has run out, B takes over and counts the second order.
    clockB.now = T0 + 20_000;
    await applied(b, await order('moving'));
    assert.equal(await orders('moving'), 2);
    // B's lease runs out in turn: A's memory of the profile (one order) is stale and must not be used.
    clockA.now = T0 + 40_000;
    await applied(a, await order('moving'));
    assert.equal(await orders('moving'), 3, 'the third order is counted on top of the second');
  });

  it('re-reads a profile another writer changed while this node thought it held the lease', async () => {
    const clockA = { now: T0 + 100_000 };
    const clockB = { now: T0 + 100_000 };
    const a = runner('node-a2', clockA);
    await applied(a, await order('skewed'));
    assert.equal(await orders('skewed'), 1);
    // B's clock runs ahead: to B, A's lease has run out although A (its clock barely moved) still counts on it.
    clockB.now = T0 + 130_000;
    const b = runner('node-b2', clockB);
    await applied(b, await order('skewed'));
    assert.equal(await orders('skewed'), 2);
    clockA.now = T0 + 101_000;
    // A's cached profile is a version behind: its commit is refused (the version moved), and the retry reads the store.
    await applied(a, await order('skewed'));
    assert.equal(await orders('skewed'), 3);
  });

  it('starts a new profile after a deletion message, not from the one it had in memory', async () => {
    const clock = { now: T0 + 200_000 };
    const a = runner('node-a3', clock);
    await order('leaving');
    await applied(a, await order('leaving'));
    assert.equal(await orders('leaving'), 2);
    const [deletion] = await store.appendMessages([{ sourceId: 'src', status: 'accepted', type: 'delete', messageId: `m-${++seq}`, userId: 'leaving', receivedAt: T0, destinations: [], body: '{"type":"delete","userId":"leaving"}' }], 0);
    await applied(a, deletion!.seq);
    assert.equal(await orders('leaving'), undefined, 'the profile is gone');
    await applied(a, await order('leaving'));
    assert.equal(await orders('leaving'), 1, 'counted from scratch');
  });
});
