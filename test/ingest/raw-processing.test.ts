import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { RawProcessor } from '../../src/ingest/raw-processor.js';
import { Metrics } from '../../src/metrics.js';
import { RegulationRunner } from '../../src/regulations/regulation-runner.js';
import { SuppressionList } from '../../src/regulations/suppression-list.js';
import { SourceDirectory } from '../../src/sources/source-directory.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { NewRawRequest, Store } from '../../src/store/store.js';
import { processLeftovers, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase } from '../helpers/postgres.js';
import { T0, addSource } from '../helpers/store-fixtures.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

/*
 * The processing stage: raw requests that ingest stored before its 200
 * become messages after it, each exactly once, with the config and
 * suppressions of the moment they were acknowledged or newer, and before a
 * deletion accepted after them runs.
 */

const HOUR = 3_600_000;
const noError = (error: unknown): void => assert.fail(error instanceof Error ? error : new Error(String(error)));

function rawCall(sourceId: string, message: object, overrides: Partial<NewRawRequest> = {}): NewRawRequest {
  return { sourceId, route: 'track', receivedAt: T0, ip: '127.0.0.1', configVersion: 0, messageCount: 1, headers: undefined, body: JSON.stringify(message), ...overrides };
}

/** A processor on `store` with its own directory and suppressions, none of which reload by themselves (no polls). */
async function processorOn(store: Store, extra: { onCaughtUp?: () => void; onError?: (error: unknown) => void; gatherMs?: number } = {}) {
  const directory = new SourceDirectory(store, { pollMs: HOUR, onError: noError });
  const suppressions = new SuppressionList(store, { pollMs: HOUR, onError: noError });
  await directory.start();
  await suppressions.start();
  const processor = new RawProcessor({
    store,
    directory,
    suppressions,
    metrics: new Metrics({ processMetrics: false }),
    now: () => T0,
    newMessageId: () => `generated-${Math.random()}`,
    pollMs: HOUR,
    onError: noError,
    ...extra,
  });
  return {
    directory,
    suppressions,
    processor,
    /** Processes until caught up. */
    async drain(): Promise<void> {
      processor.wake();
      await eventually(async () => ((await store.rawBacklog()).requests === 0 ? true : undefined), 10_000, 'processing');
    },
    async stop(): Promise<void> {
      await processor.stop();
      directory.stop();
      suppressions.stop();
    },
  };
}

describe('processing raw requests (SQLite)', () => {
  let store: SqliteStore;
  beforeEach(async () => {
    store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
    await store.migrate();
    await addSource(store, 's');
  });
  afterEach(async () => {
    await store.close();
  });

  it('turns raw requests into messages in order, de-duplicated, and removes them in the same commit', async () => {
    await store.appendRawRequests([
      rawCall('s', { userId: 'u', event: 'A', messageId: 'm1' }),
      rawCall('s', { batch: [{ type: 'track', userId: 'u', event: 'B', messageId: 'm2' }, { type: 'track', userId: 'u', event: 'C', messageId: 'm1' }, { type: 'track' }] }, { route: 'batch', messageCount: 3 }),
    ]);
    assert.deepEqual(await store.rawBacklog(), { requests: 2, messages: 4, oldestReceivedAt: T0 });
    const p = await processorOn(store);
    try {
      await p.drain();
    } finally {
      await p.stop();
    }
    const messages = (await store.listRecentMessages('s', 10)).reverse();
    assert.deepEqual(
      messages.map((m) => [m.messageId ?? null, m.status]),
      [['m1', 'accepted'], ['m2', 'accepted'], ['m1', 'duplicate'], [messages[3]!.messageId ?? null, 'rejected']],
    );
    assert.equal(JSON.parse(messages[0]!.body).receivedAt, new Date(T0).toISOString(), 'receivedAt is the ingest time stored with the raw request');
    assert.equal((await store.rawBacklog()).requests, 0);
  });

  it('a build that throws writes nothing: the raw requests stay for the next try', async () => {
    await store.appendRawRequests([rawCall('s', { userId: 'u', event: 'A' })]);
    await assert.rejects(
      store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, () => {
        throw new Error('boom');
      }, 0),
      /boom/,
    );
    assert.equal((await store.rawBacklog()).requests, 1);
    assert.equal((await store.listRecentMessages('s', 10)).length, 0);
  });

  it('a raw request whose processing throws is stored as rejected with the reason, logged, and does not block the ones after it', async () => {
    // A batch context nested a few thousand levels passes ingest's checks
    // (parsed without recursion, under the size limits) but overflows the
    // stack when merged into the messages: a poison row if it were retried.
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    await store.appendRawRequests([
      rawCall('s', { userId: 'u', event: 'before' }),
      { ...rawCall('s', {}, { route: 'batch', messageCount: 1 }), body: `{"batch":[{"type":"track","userId":"u","event":"deep"}],"context":{"a":${deep}}}` },
      rawCall('s', { userId: 'u', event: 'after' }),
    ]);
    const errors: unknown[] = [];
    const p = await processorOn(store, { onError: (error) => errors.push(error) });
    try {
      await p.drain();
    } finally {
      await p.stop();
    }
    const messages = (await store.listRecentMessages('s', 10)).reverse();
    assert.deepEqual(
      messages.map((m) => [m.status, m.status === 'rejected' ? m.reason : JSON.parse(m.body).event]),
      [['accepted', 'before'], ['rejected', 'the request could not be processed: RangeError: Maximum call stack size exceeded'], ['accepted', 'after']],
    );
    assert.equal(errors.length, 1, 'the failure is logged once');
  });

  it('screens against a suppression answered before the request, reloading an older list first', async () => {
    const p = await processorOn(store);
    try {
      // The processor's list stops following the store: only the version stored with the raw request can make it reload.
      p.suppressions.stop();
      p.directory.stop();
      await store.createRegulation({ id: 'reg-1', regulationType: 'SUPPRESS_ONLY', subjectIds: ['bad'], sourceIds: undefined, stepSourceIds: ['s'], createdAt: T0 });
      const version = await store.getConfigVersion();
      assert.ok(p.suppressions.configVersion < version, 'the processor holds an older list');
      await store.appendRawRequests([rawCall('s', { userId: 'bad', event: 'A' }, { configVersion: version }), rawCall('s', { userId: 'good', event: 'A' }, { configVersion: version })]);
      await p.drain();
    } finally {
      await p.stop();
    }
    const messages = (await store.listRecentMessages('s', 10)).reverse();
    assert.deepEqual(messages.map((m) => [m.userId, m.status]), [['bad', 'suppressed'], ['good', 'accepted']]);
  });

  it('a deletion waits for raw requests acknowledged before it, then erases their messages too, even when they were received "after" it', async () => {
    await deletionWaitsForEarlierRawRequests(store, store);
  });

  it('with a gathering time, a raw commit\'s notification still makes a pass (no poll needed)', async () => {
    const p = await processorOn(store, { gatherMs: 5 });
    try {
      p.processor.start();
      await eventually(async () => ((await store.rawBacklog()).requests === 0 ? true : undefined), 10_000, 'the first pass');
      await store.appendRawRequests([rawCall('s', { userId: 'u', event: 'A' })]);
      await store.appendRawRequests([rawCall('s', { userId: 'u', event: 'B' })]);
      await eventually(async () => ((await store.rawBacklog()).requests === 0 ? true : undefined), 10_000, 'processing after the notification');
    } finally {
      await p.stop();
    }
    const events = (await store.listRecentMessages('s', 10)).reverse().map((m) => (JSON.parse(m.body) as { event: string }).event);
    assert.deepEqual(events, ['A', 'B']);
  });

  it('catching up wakes the deletion runner only when a step waits for raw requests', async () => {
    let lookups = 0;
    const counted = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'listPendingRegulationSteps') lookups++;
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const regulations = new RegulationRunner({ store: counted, now: () => T0 + 10, newMessageId: () => 'delete-1', pollMs: HOUR, onError: noError });
    const p = await processorOn(store, { onCaughtUp: () => regulations.rawRequestsCaughtUp() });
    try {
      // Not started (no first pass, no polls): only a wake would make it look for steps.
      await store.appendRawRequests([rawCall('s', { userId: 'u', event: 'A' })]);
      await p.drain();
      await p.processor.stop(); // after the pass that found nothing left and called onCaughtUp
      assert.equal(lookups, 0, 'nothing waits: catching up makes no pass');
    } finally {
      await regulations.stop();
      await p.stop();
    }
  });
});

/**
 * Two raw requests acknowledged by the `ingesting` node, then a deletion of
 * one's user accepted by the `accepting` node, whose clock runs five minutes
 * behind: the requests' receivedAt is later than the deletion's createdAt.
 * The deletion must still wait for them to be processed, then erase the
 * user's message. (The two may be one store: one rule on every store.)
 */
async function deletionWaitsForEarlierRawRequests(ingesting: Store, accepting: Store): Promise<void> {
  const ingestingClock = T0 + 5 * 60_000;
  const acceptingClock = T0;
  let regulations: RegulationRunner | undefined;
  const p = await processorOn(ingesting, { onCaughtUp: () => regulations?.rawRequestsCaughtUp() });
  try {
    await ingesting.appendRawRequests([
      rawCall('s', { userId: 'gone', event: 'A' }, { receivedAt: ingestingClock }),
      rawCall('s', { userId: 'kept', event: 'A' }, { receivedAt: ingestingClock }),
    ]);
    // Accepted after both 200s, at an earlier time by its own clock.
    await accepting.createRegulation({ id: 'del-1', regulationType: 'DELETE_ONLY', subjectIds: ['gone'], sourceIds: undefined, stepSourceIds: ['s'], createdAt: acceptingClock });
    // Raw requests pending: the step must wait. One whole pass: the runner
    // lists the pending step, checks it, then lists again and finds nothing
    // left to try; stopping before the second listing would end the pass
    // before the check.
    let listings = 0;
    const counted = Object.create(accepting, {
      listPendingRegulationSteps: {
        value: async (limit: number) => {
          const steps = await accepting.listPendingRegulationSteps(limit);
          listings++;
          return steps;
        },
      },
    }) as Store;
    regulations = new RegulationRunner({ store: counted, now: () => acceptingClock + 10, newMessageId: () => 'delete-1', pollMs: HOUR, onError: noError });
    regulations.start();
    await eventually(() => (listings >= 2 ? true : undefined), 10_000, 'a whole pass of the runner');
    assert.equal((await accepting.getRegulation('del-1'))?.status, 'INITIALIZED', 'the step waits while earlier raw requests are unprocessed');
    assert.equal((await ingesting.rawBacklog()).requests, 2);
    // The runner polls once an hour: only the processing stage's catching up can wake it again.
    p.processor.start();
    await eventually(async () => ((await accepting.getRegulation('del-1'))?.status === 'FINISHED' ? true : undefined), 10_000, 'the deletion to finish');
  } finally {
    await regulations?.stop();
    await p.stop();
  }
  const users = (await accepting.listRecentMessages('s', 10)).map((m) => m.userId);
  assert.deepEqual(users, ['kept'], 'the message of the deleted user, processed after the deletion was accepted, is erased');
}

describe('kill -9 with raw requests not yet processed', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('processes every one exactly once after a restart', { timeout: 120_000 }, async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-raw-kill-'));
    dirs.push(dataDir);
    const env = { SWITCHYARD_DATA_DIR: dataDir };
    const first = await startChildSwitchyard(env);
    let source: { id: string; writeKey: string };
    try {
      const created = await fetch(`${first.url}/admin/v1/sources`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'raw-kill' }),
      });
      source = (await created.json()) as { id: string; writeKey: string };
      // One request through the server, so the source is known to be served.
      const probe = await fetch(`${first.url}/v1/track`, { method: 'POST', headers: { authorization: basicAuth(source.writeKey) }, body: JSON.stringify({ userId: 'u', event: 'probe', messageId: 'probe' }) });
      assert.equal(probe.status, 200);
    } finally {
      await first.kill('SIGKILL');
    }
    // 200 batches of 100 acknowledged and not processed, as a kill right after their 200s leaves them.
    const store = SqliteStore.open({ dataDir, durability: 'process' });
    await store.migrate();
    const version = await store.getConfigVersion();
    const batches = Array.from({ length: 200 }, (_, b) =>
      rawCall(source.id, { batch: Array.from({ length: 100 }, (_, i) => ({ type: 'track', userId: 'u', event: 'E', messageId: `b${b}-${i}` })) }, { route: 'batch', messageCount: 100, configVersion: version }),
    );
    await store.appendRawRequests(batches);
    await store.close();

    // Killed while processing them, then restarted until none is left.
    const second = await startChildSwitchyard(env);
    const watcher = SqliteStore.open({ dataDir, durability: 'process' });
    await watcher.migrate();
    let leftAtKill: number;
    try {
      await eventually(async () => ((await watcher.listRecentMessages(source.id, 2)).length > 1 ? true : undefined), 30_000, 'processing to start');
      await second.kill('SIGKILL');
      leftAtKill = (await watcher.rawBacklog()).messages;
    } finally {
      await second.kill('SIGKILL');
      await watcher.close();
    }
    assert.ok(leftAtKill > 0, 'the kill left raw requests unprocessed');
    await processLeftovers(env, dataDir);

    const check = SqliteStore.open({ dataDir, durability: 'process' });
    await check.migrate();
    try {
      const messages = await check.listRecentMessages(source.id, 1_000_000);
      const ids = new Set(messages.map((m) => m.messageId));
      assert.equal(ids.size, 20_001, `every acknowledged message stored (${leftAtKill} were unprocessed at the kill)`);
      assert.equal(messages.length, 20_001, 'each exactly once');
      assert.ok(messages.every((m) => m.status === 'accepted'));
    } finally {
      await check.close();
    }
  });
});

/** Two nodes (store handles) on a fresh PostgreSQL database with source `s`, dropped after `work`. */
async function onTwoNodes(work: (a: Store, b: Store) => Promise<void>): Promise<void> {
  const database = await freshDatabase();
  const a = PostgresStore.open({ databaseUrl: database.url, durability: 'process' });
  const b = PostgresStore.open({ databaseUrl: database.url, durability: 'process' });
  try {
    await a.migrate();
    await b.migrate();
    await addSource(a, 's');
    await work(a, b);
  } finally {
    await a.close();
    await b.close();
    await database.drop();
  }
}

await describePostgres('processing raw requests on several nodes (PostgreSQL)', () => {
  it('a deletion accepted by a node whose clock runs behind the ingesting node\'s still waits for, and erases, what was acknowledged before it', { timeout: 60_000 }, async () => {
    await onTwoNodes((ingesting, accepting) => deletionWaitsForEarlierRawRequests(ingesting, accepting));
  });

  it('two nodes processing at once never process one raw request twice', { timeout: 120_000 }, async () => {
    await onTwoNodes(async (a, b) => {
      // Single calls without messageIds: a second processing would store a second message, never a duplicate.
      const raws = Array.from({ length: 3_000 }, (_, i) => rawCall('s', { userId: `u${i}`, event: 'E' }));
      for (let i = 0; i < raws.length; i += 500) await a.appendRawRequests(raws.slice(i, i + 500));
      const nodes = [await processorOn(a), await processorOn(b)];
      const processed = [0, 0];
      try {
        // Both drain the same table at once, each in many small transactions.
        const work = nodes.map(async (node, n) => {
          const store = n === 0 ? a : b;
          for (;;) {
            const done = await store.processRawRequests({ maxRequests: 25, maxMessages: 25 }, (rows) => rows.map((row) => [{ sourceId: row.sourceId, status: 'accepted' as const, type: 'track', messageId: undefined, userId: (JSON.parse(row.body) as { userId: string }).userId, receivedAt: row.receivedAt, body: row.body, destinations: [] }]), 0);
            if (done.requests === 0) return;
            processed[n]! += done.requests;
          }
        });
        await Promise.all(work);
      } finally {
        for (const node of nodes) await node.stop();
      }
      assert.equal(processed[0]! + processed[1]!, 3_000, `each raw request processed once (${processed.join(' + ')})`);
      assert.ok(processed[0]! > 0 && processed[1]! > 0, `both nodes took part (${processed.join(' + ')})`);
      const messages = await a.listRecentMessages('s', 10_000);
      assert.equal(messages.length, 3_000);
      assert.equal(new Set(messages.map((m) => m.userId)).size, 3_000);
      assert.equal((await a.rawBacklog()).requests, 0);
    });
  });
});
