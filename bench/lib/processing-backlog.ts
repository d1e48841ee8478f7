import type { Target } from './target.js';

/**
 * Switchyard's 200 means "stored raw"; the processing stage makes messages
 * of it later. A bench that counts 200s must also say how much of them was
 * not yet a message when the load ended, and what finishing that cost.
 */
export interface ProcessingAtEnd {
  /** Acknowledged messages not yet processed when the load ended. */
  readonly unprocessedAtEnd: number;
  /** How long the oldest of them had waited, in seconds. */
  readonly lagAtEndSec: number;
  /** From the end of the load until none was left (undefined: not within the timeout). */
  readonly drainedAfterSec: number | undefined;
  /** CPU seconds of the server process while it drained. */
  readonly drainCpuSec: number | undefined;
}

const DRAIN_TIMEOUT_MS = 120_000;

/** The server's processing gauges (ingest's view, read every 200 ms by the server). */
export async function readProcessing(target: Target): Promise<{ unprocessed: number; lagSec: number } | undefined> {
  const text = await (await fetch(`${target.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const unprocessed = /^switchyard_ingest_unprocessed_messages\s+([\d.e+-]+)$/m.exec(text)?.[1];
  const lag = /^switchyard_ingest_processing_lag_seconds\s+([\d.e+-]+)$/m.exec(text)?.[1];
  if (unprocessed === undefined) return undefined;
  return { unprocessed: Number(unprocessed), lagSec: lag === undefined ? 0 : Number(lag) };
}

/**
 * Right after a load: the backlog as it stands, then waits until it is
 * processed, measuring the time and the server's CPU it took. Resolves
 * undefined for a server without the gauges (a baseline).
 */
export async function processingAfterLoad(target: Target): Promise<ProcessingAtEnd | undefined> {
  const loadEnd = Date.now();
  const cpuAtEnd = target.cpuSeconds();
  const first = await readProcessing(target);
  if (first === undefined) return undefined;
  // The gauge is ingest's reading of at most 200 ms ago: wait for a reading after the load's end.
  await new Promise((resolve) => setTimeout(resolve, 250));
  const atEnd = (await readProcessing(target)) ?? first;
  let drainedAt: number | undefined;
  let current = atEnd;
  while (Date.now() - loadEnd < DRAIN_TIMEOUT_MS) {
    if (current.unprocessed === 0) {
      drainedAt = Date.now();
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    current = (await readProcessing(target)) ?? current;
  }
  const cpuNow = target.cpuSeconds();
  return {
    unprocessedAtEnd: Math.max(first.unprocessed, atEnd.unprocessed),
    lagAtEndSec: Math.max(first.lagSec, atEnd.lagSec),
    drainedAfterSec: drainedAt === undefined ? undefined : Math.round((drainedAt - loadEnd) / 100) / 10,
    drainCpuSec: cpuNow === undefined || cpuAtEnd === undefined ? undefined : Math.round((cpuNow - cpuAtEnd) * 100) / 100,
  };
}
