import path from 'node:path';
import { isMainThread } from 'node:worker_threads';

/**
 * One writer at a time per SQLite file among the threads of one process,
 * decided in shared memory instead of by SQLite's busy handler.
 *
 * SQLite lets one connection write at a time; a second one that wants to
 * write waits in its busy handler, which sleeps in growing steps (up to
 * 100 ms) and so keeps sleeping after the lock is free. For the ingest
 * thread, whose event loop is blocked meanwhile, that was the longest stall
 * of a whole run (44–100 ms) while the stage thread was delivering. Here a
 * writer waits with `Atomics.waitAsync`: its event loop keeps running (ingest
 * goes on reading and parsing requests), and it wakes the moment the holder
 * releases. The main thread (ingest, admin API) goes first: the stage thread
 * takes the lock only when no main-thread writer is waiting.
 *
 * SQLite's own locking stays underneath (other processes, such as the CLI,
 * still meet `busy_timeout`), so a holder that vanished without releasing
 * (a thread terminated mid-write) costs a waiter {@link STALE_AFTER_MS} once,
 * never correctness: the waiter then goes ahead and meets SQLite's lock.
 */

/** Cells of the shared Int32Array. */
const HOLDER = 0; // 0 = free, else the holder's tag
const PRIORITY_WAITERS = 1; // main-thread writers waiting
const RELEASES = 2; // bumped and notified on every release
const CHECKPOINTERS = 3; // connections that checkpoint the WAL on a timer (see SqliteStore)

/** A waiter that has seen no release for this long goes ahead (see above). */
const STALE_AFTER_MS = 5_000;

/** Files' lock memory in this thread, by absolute path. */
const buffers = new Map<string, SharedArrayBuffer>();

/** The lock memory of every file opened in this thread, to hand to a worker thread. */
export function sharedWriteLocks(): Map<string, SharedArrayBuffer> {
  return new Map(buffers);
}

/** In a worker thread, before opening any store: use the main thread's lock memory. */
export function adoptWriteLocks(shared: ReadonlyMap<string, SharedArrayBuffer>): void {
  for (const [file, buffer] of shared) buffers.set(file, buffer);
}

let nextTag = 1;

/** `Atomics.waitAsync` (V8, Node 16+); the repo's TypeScript lib (ES2023) does not declare it yet. */
type WaitAsync = (
  cells: Int32Array,
  index: number,
  value: number,
  timeoutMs: number,
) => { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/**
 * Awaits a pending `Atomics.waitAsync` with a timer that keeps the thread
 * alive meanwhile: the wait itself holds no handle on the event loop, so a
 * worker whose only pending work is this wait (the stage thread at start,
 * while ingest writes) would see an empty loop and exit with code 13
 * ("unfinished top-level await"), its stages never started.
 */
async function keptAlive<T>(waiting: Promise<T>): Promise<T> {
  const keepAlive = setTimeout(() => undefined, STALE_AFTER_MS + 1_000);
  try {
    return await waiting;
  } finally {
    clearTimeout(keepAlive);
  }
}

export class WriteLock {
  private readonly cells: Int32Array;
  /** This lock object's mark in the HOLDER cell: the thread id and a counter, never 0. */
  private readonly tag: number;
  private readonly priority = isMainThread;

  constructor(file: string) {
    const key = path.resolve(file);
    let buffer = buffers.get(key);
    if (buffer === undefined) {
      buffer = new SharedArrayBuffer(4 * Int32Array.BYTES_PER_ELEMENT);
      buffers.set(key, buffer);
    }
    this.cells = new Int32Array(buffer);
    this.tag = (((isMainThread ? 0 : 1) << 30) | (nextTag++ & 0x3fffffff)) || 1;
  }

  /** Resolves once this thread holds the lock; call {@link release} after the write, in `finally`. */
  async acquire(): Promise<void> {
    if (this.tryTake()) return;
    const cells = this.cells;
    if (this.priority) Atomics.add(cells, PRIORITY_WAITERS, 1);
    try {
      let waitedSince = performance.now();
      let seen = Atomics.load(cells, RELEASES);
      for (;;) {
        if (this.tryTake()) return;
        const result = waitAsync(cells, RELEASES, seen, STALE_AFTER_MS);
        const outcome = result.async ? await keptAlive(result.value) : result.value;
        const now = Atomics.load(cells, RELEASES);
        if (now !== seen) {
          seen = now;
          waitedSince = performance.now();
        } else if (outcome === 'timed-out' && performance.now() - waitedSince >= STALE_AFTER_MS) {
          // No release for that long: a holder that is gone. Take it over; SQLite still guards the write.
          const holder = Atomics.load(cells, HOLDER);
          if (holder !== 0 && Atomics.compareExchange(cells, HOLDER, holder, this.tag) === holder) return;
        }
      }
    } finally {
      if (this.priority) {
        Atomics.sub(cells, PRIORITY_WAITERS, 1);
        // A stage-thread writer may be waiting only for the main thread's turn to end.
        Atomics.notify(cells, RELEASES);
      }
    }
  }

  release(): void {
    const cells = this.cells;
    if (Atomics.compareExchange(cells, HOLDER, this.tag, 0) !== this.tag) return; // taken over meanwhile
    Atomics.add(cells, RELEASES, 1);
    Atomics.notify(cells, RELEASES);
  }

  /** Runs a synchronous write under the lock. */
  async run<T>(write: () => T): Promise<T> {
    await this.acquire();
    try {
      return write();
    } finally {
      this.release();
    }
  }

  /** This thread's connection checkpoints the WAL on a timer from now on (`true`) or no longer (`false`). */
  checkpointing(active: boolean): void {
    Atomics.add(this.cells, CHECKPOINTERS, active ? 1 : -1);
  }

  /** Whether another connection to the file checkpoints the WAL on a timer. */
  get checkpointedElsewhere(): boolean {
    return Atomics.load(this.cells, CHECKPOINTERS) > 0;
  }

  private tryTake(): boolean {
    if (!this.priority && Atomics.load(this.cells, PRIORITY_WAITERS) > 0) return false;
    return Atomics.compareExchange(this.cells, HOLDER, 0, this.tag) === 0;
  }
}
