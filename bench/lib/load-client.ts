import { fileURLToPath } from 'node:url';
import { spawnManaged } from './children.js';
import type { LoadArgs, LoadResult, WorkerMessage } from './load-protocol.js';

const WORKER = fileURLToPath(new URL('../load-worker.js', import.meta.url));
/** Time for the worker to start, connect and report, beyond the load itself. */
const SLACK_MS = 30_000;

export interface LoadHooks {
  /** taskset CPU list for the load generator. */
  readonly cpus: string | undefined;
  /** Called when the warm-up ends and the measured part begins. */
  readonly onMeasuring?: () => void;
}

/** Runs one warm-up plus measured phase in a fresh autocannon process (bench/load-worker.ts); lib/http-load.ts decides when. */
export async function runLoadWorker(args: LoadArgs, hooks: LoadHooks): Promise<LoadResult> {
  let result: LoadResult | undefined;
  let failure: string | undefined;
  const worker = spawnManaged('load-worker', process.execPath, [WORKER, JSON.stringify(args)], {
    cpus: hooks.cpus,
    onStdoutLine: (line) => {
      let message: WorkerMessage;
      try {
        message = JSON.parse(line) as WorkerMessage;
      } catch {
        return;
      }
      if (message.event === 'measuring') hooks.onMeasuring?.();
      else if (message.event === 'error') failure = message.message;
      else if (message.event === 'result') {
        const { event: _event, ...rest } = message;
        result = rest;
      }
    },
  });

  const bound = (args.warmupSec + args.durationSec) * 1000 + SLACK_MS;
  const timer = setTimeout(() => {
    failure ??= `load generator did not finish within ${bound} ms`;
    void worker.stop(1000);
  }, bound);
  const status = await worker.exited.finally(() => clearTimeout(timer));
  if (result !== undefined) return result;
  throw new Error(
    `load generator failed (exit ${status.code ?? status.signal}): ${failure ?? 'no result'}\n${worker.outputTail().slice(-2000)}`,
  );
}
