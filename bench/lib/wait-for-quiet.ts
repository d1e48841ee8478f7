import { setTimeout as sleep } from 'node:timers/promises';
import { machineCpu } from './proc-stats.js';

/** Machine-wide CPU seconds per second below which the machine counts as quiet. */
const QUIET_BELOW = 0.25;

/**
 * Waits, at most `maxSec`, for the machine to fall quiet before a phase.
 * Between phases our own processes are idle, so whatever CPU is busy
 * belongs to someone else, and a phase started then would measure them too.
 */
export async function waitForQuiet(maxSec: number): Promise<{ readonly waitedSec: number; readonly quiet: boolean }> {
  const started = performance.now();
  for (;;) {
    const before = machineCpu();
    const from = performance.now();
    await sleep(1000);
    const after = machineCpu();
    const busy = before === undefined || after === undefined ? 0 : (after.busySec - before.busySec) / ((performance.now() - from) / 1000);
    const waitedSec = Math.round((performance.now() - started) / 100) / 10;
    if (busy < QUIET_BELOW) return { waitedSec, quiet: true };
    if (waitedSec >= maxSec) return { waitedSec, quiet: false };
  }
}
