/**
 * A Node preload (`NODE_OPTIONS=--import …/stage-thread-killer.js`) that ends
 * the stage thread of a real `serve` process, as a crash would: nothing in the
 * product knows about it. Worker threads run preloads too; the main thread is
 * left alone.
 *
 * - `KILL_STAGE_THREAD_WHEN`: `at-start` (before the thread says ready) or
 *   `after-ready` (right after it said ready);
 * - `KILL_STAGE_THREAD_TIMES`: how many stage threads end so (default: all);
 * - `KILL_STAGE_THREAD_COUNTER`: a file counting the threads ended so far.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { isMainThread, parentPort } from 'node:worker_threads';

const when = process.env['KILL_STAGE_THREAD_WHEN'];
const times = Number(process.env['KILL_STAGE_THREAD_TIMES'] ?? Infinity);
const counter = process.env['KILL_STAGE_THREAD_COUNTER'];

function killedSoFar(): number {
  return counter !== undefined && existsSync(counter) ? readFileSync(counter, 'utf8').length : 0;
}

function die(): void {
  if (counter !== undefined) appendFileSync(counter, 'x');
  // In a worker thread, process.exit ends that thread only, with this code.
  process.exit(13);
}

if (!isMainThread && parentPort !== null && when !== undefined && killedSoFar() < times) {
  if (when === 'at-start') {
    die();
  } else if (when === 'after-ready') {
    const port = parentPort;
    const post = port.postMessage.bind(port);
    port.postMessage = (message: unknown, ...rest: never[]) => {
      post(message, ...rest);
      if ((message as { type?: unknown } | null)?.type === 'ready') setImmediate(die);
    };
  }
}
