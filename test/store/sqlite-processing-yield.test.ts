/**
 * The processing transaction on the stage thread gives the SQLite write lock
 * up to a waiting ingest commit: it stores its raw requests in parts and ends
 * after the part during which a main-thread writer began to wait, leaving
 * the rest for its next transaction, so that ingest's commit (whose 200s
 * wait on it) waits for one part, not the whole batch. Nothing is lost or
 * processed twice: the rest is taken by the next transaction.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { PROCESSING_PART } from '../../src/store/sqlite/raw-queries.js';
import { sharedWriteLocks } from '../../src/store/sqlite/write-lock.js';
import type { NewRawRequest } from '../../src/store/store.js';

const STORE_MODULE = new URL('../../src/store/sqlite/sqlite-store.js', import.meta.url).href;
const LOCK_MODULE = new URL('../../src/store/sqlite/write-lock.js', import.meta.url).href;

/**
 * The stage thread's side: on 'process', one processing transaction whose
 * first part stops (inside the transaction, holding the write lock) until
 * the main thread says its commit is waiting; then it reports how many raw
 * requests the transaction took. `build` stores nothing: what is counted is
 * the raw requests taken.
 */
const STAGE = `
const { parentPort, workerData } = require('node:worker_threads');
Promise.all([import(workerData.lockModule), import(workerData.storeModule)]).then(async ([{ adoptWriteLocks }, { SqliteStore }]) => {
  adoptWriteLocks(workerData.locks);
  const store = SqliteStore.open({ dataDir: workerData.dir, durability: 'process' });
  await store.migrate();
  const signal = new Int32Array(workerData.signal);
  let parts = 0;
  const build = (rows) => {
    if (parts++ === 0) {
      parentPort.postMessage({ inFirstPart: true });
      Atomics.wait(signal, 0, 0, 10000);
    }
    return rows.map(() => []);
  };
  parentPort.on('message', async (message) => {
    if (message === 'process') {
      const processed = await store.processRawRequests({ maxRequests: 500, maxMessages: 500 }, build, 0);
      parentPort.postMessage({ requests: processed.requests, caughtUp: processed.caughtUp, parts });
    }
    if (message === 'exit') { await store.close(); process.exit(0); }
  });
  parentPort.postMessage({ ready: true });
});`;

function raw(index: number): NewRawRequest {
  return { sourceId: 'src-yield', route: 'track', receivedAt: Date.now(), ip: undefined, configVersion: 1, messageCount: 1, headers: undefined, body: `{"userId":"u-${index}"}` };
}

test('a processing transaction on the stage thread ends after the part during which an ingest commit began to wait', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-yield-'));
  const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
  await store.migrate();
  const signal = new SharedArrayBuffer(4);
  const worker = new Worker(STAGE, {
    eval: true,
    workerData: { lockModule: LOCK_MODULE, storeModule: STORE_MODULE, locks: sharedWriteLocks(), dir, signal },
  });
  try {
    const total = PROCESSING_PART * 3;
    await store.appendRawRequests(Array.from({ length: total }, (_, index) => raw(index)));
    assert.deepEqual(await once(worker, 'message'), [{ ready: true }]);

    worker.postMessage('process');
    assert.deepEqual(await once(worker, 'message'), [{ inFirstPart: true }]);
    // Ingest commits while the stage thread holds the lock: the commit waits for it.
    const appended = store.appendRawRequests([raw(total)]);
    Atomics.store(new Int32Array(signal), 0, 1);
    Atomics.notify(new Int32Array(signal), 0);
    const [first] = (await once(worker, 'message')) as [{ requests: number; caughtUp: boolean; parts: number }];
    await appended;
    assert.equal(first.requests, PROCESSING_PART, 'the transaction went on past the part during which ingest began to wait');
    assert.equal(first.caughtUp, false, 'a transaction that gave way must say that more is left');
    assert.equal(first.parts, 1);
    assert.equal((await store.rawBacklog()).requests, total + 1 - PROCESSING_PART, 'the rest, and the new commit, are still to be processed');

    // With nobody waiting, the next transaction takes the rest in one go (parts of PROCESSING_PART).
    worker.postMessage('process');
    const [second] = (await once(worker, 'message')) as [{ requests: number; caughtUp: boolean }];
    assert.equal(second.requests, total + 1 - PROCESSING_PART);
    assert.equal(second.caughtUp, true);
    assert.equal((await store.rawBacklog()).requests, 0);
  } finally {
    worker.postMessage('exit');
    await once(worker, 'exit');
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});
