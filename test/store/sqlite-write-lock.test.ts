/**
 * The SQLite write lock between the ingest (main) thread and a worker thread
 * on the same file: a main-thread write waits for the worker's without
 * blocking the main event loop, and goes ahead as soon as it is released.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { SqliteStore, SQLITE_FILE } from '../../src/store/sqlite/sqlite-store.js';
import { sharedWriteLocks } from '../../src/store/sqlite/write-lock.js';
import type { IngestEntry } from '../../src/store/store.js';

const WRITE_LOCK_MODULE = new URL('../../src/store/sqlite/write-lock.js', import.meta.url).href;

/** A worker thread that takes the file's write lock on 'take' and releases it on 'release'. */
const HOLDER = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.module).then(({ adoptWriteLocks, WriteLock }) => {
  adoptWriteLocks(workerData.locks);
  const lock = new WriteLock(workerData.file);
  parentPort.on('message', async (message) => {
    if (message === 'take') { await lock.acquire(); parentPort.postMessage('taken'); }
    if (message === 'release') { lock.release(); parentPort.postMessage('released'); }
    if (message === 'exit') process.exit(0);
  });
  parentPort.postMessage('ready');
});`;

function entry(messageId: string): IngestEntry {
  return {
    sourceId: 'src-lock',
    status: 'accepted',
    type: 'track',
    messageId,
    userId: 'user-1',
    receivedAt: Date.now(),
    body: JSON.stringify({ type: 'track', event: 'Locked', messageId }),
    destinations: [],
  };
}

test('a main-thread write waits for the stage thread without blocking its event loop, then commits', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-lock-'));
  const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
  const worker = new Worker(HOLDER, {
    eval: true,
    workerData: { module: WRITE_LOCK_MODULE, locks: sharedWriteLocks(), file: path.join(dir, SQLITE_FILE) },
  });
  try {
    await store.migrate();
    const now = Date.now();
    await store.insertSource({ id: 'src-lock', name: 'lock', writeKey: 'wk-lock-0123456789abcdef', enabled: true, createdAt: now, updatedAt: now });
    const [ready] = (await once(worker, 'message')) as [string];
    assert.equal(ready, 'ready');

    worker.postMessage('take');
    assert.deepEqual(await once(worker, 'message'), ['taken']);

    let committed = false;
    const append = store.appendMessages([entry('m-1')], 0).then((results) => {
      committed = true;
      return results;
    });
    // The event loop keeps turning while the write waits: ingest goes on reading requests meanwhile.
    for (let turn = 0; turn < 20; turn++) await nextTurn();
    assert.equal(committed, false, 'the write went ahead while the other thread held the lock');

    worker.postMessage('release');
    const [results] = await Promise.all([append, once(worker, 'message')]);
    assert.equal(results[0]?.status, 'accepted');
    assert.deepEqual(
      (await store.listRecentMessages('src-lock', 10)).map((m) => m.messageId),
      ['m-1'],
    );
  } finally {
    worker.postMessage('exit');
    await once(worker, 'exit');
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

/**
 * A worker whose only pending work is waiting for the lock (the stage thread
 * at start while ingest writes): `Atomics.waitAsync` alone holds nothing on
 * the event loop, so the worker used to exit with code 13 ("unfinished
 * top-level await") instead of waiting, and its stages never started.
 */
const WAITER = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.module).then(async ({ adoptWriteLocks, WriteLock }) => {
  adoptWriteLocks(workerData.locks);
  const lock = new WriteLock(workerData.file);
  // Nothing else keeps this thread alive: no listener on parentPort, no timer.
  parentPort.unref();
  parentPort.postMessage('waiting');
  await lock.acquire();
  lock.release();
  parentPort.postMessage('acquired');
});`;

test('a worker that only waits for the write lock stays alive until it gets it', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-lock-'));
  const file = path.join(dir, SQLITE_FILE);
  const { WriteLock } = await import(WRITE_LOCK_MODULE);
  const held = new WriteLock(file);
  await held.acquire();
  const worker = new Worker(WAITER, { eval: true, workerData: { module: WRITE_LOCK_MODULE, locks: sharedWriteLocks(), file } });
  const messages: string[] = [];
  worker.on('message', (message: string) => messages.push(message));
  const exited = once(worker, 'exit') as Promise<[number]>;
  try {
    await new Promise<void>((resolve) => worker.once('message', () => resolve()));
    // Give an empty event loop every chance to end the worker while the lock is held.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(messages, ['waiting'], 'the worker ended while it waited for the lock');
    held.release();
    const [code] = await exited;
    assert.equal(code, 0);
    assert.deepEqual(messages, ['waiting', 'acquired']);
  } finally {
    held.release();
    await worker.terminate();
    await rm(dir, { recursive: true, force: true });
  }
});
