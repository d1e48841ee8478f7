import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { loadGenerator } from './http-load.js';

/**
 * Which CPUs the servers and the load generator may use. On a small machine
 * an unpinned load generator steals cycles from the server it measures, and
 * the two sides of a comparison would not get the same share; pinning makes
 * the split explicit and reportable. Children are started on their CPUs by
 * children.ts's `pinned`.
 */
export interface CpuPlan {
  readonly available: readonly number[];
  readonly pinned: boolean;
  /** taskset CPU list, or undefined when unpinned. */
  readonly server: string | undefined;
  readonly loadGenerator: string | undefined;
  readonly note: string;
}

export function planCpus(wantPinning: boolean): CpuPlan {
  const available = allowedCpus();
  const describe = (list: readonly number[]): string => list.join(',');
  if (!wantPinning) {
    return { available, pinned: false, server: undefined, loadGenerator: undefined, note: `unpinned: the server and the load generator share ${available.length} CPU(s)` };
  }
  if (available.length < 2) {
    return { available, pinned: false, server: undefined, loadGenerator: undefined, note: 'only one CPU: the server and the load generator share it; ratios are still comparable, absolute figures are low' };
  }
  if (!hasTaskset()) {
    return { available, pinned: false, server: undefined, loadGenerator: undefined, note: `taskset not found: the server and the load generator share ${available.length} CPUs` };
  }
  // One CPU for the load generator (wrk or autocannon): the server gets the rest.
  const loadCpus = available.slice(-1);
  const serverCpus = available.slice(0, -1);
  return {
    available,
    pinned: true,
    server: describe(serverCpus),
    loadGenerator: describe(loadCpus),
    note:
      `${available.length} CPUs in all. Every server process (Switchyard and baseline alike) is pinned to CPU(s) ${describe(serverCpus)}, ` +
      `the load generator (${loadGenerator()}) to CPU ${describe(loadCpus)}. The idle server of a pair shares the server CPU(s).`,
  };
}

function allowedCpus(): number[] {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const list = /^Cpus_allowed_list:\s*(.+)$/m.exec(status)?.[1];
    if (list !== undefined) return parseCpuList(list);
  } catch {
    // Not Linux: assume the usual numbering.
  }
  return Array.from({ length: os.availableParallelism() }, (_, i) => i);
}

/** "0-2,4" → [0, 1, 2, 4] */
export function parseCpuList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.trim().split(',')) {
    const [from, to] = part.split('-').map(Number);
    if (from === undefined || Number.isNaN(from)) continue;
    const last = to === undefined || Number.isNaN(to) ? from : to;
    for (let cpu = from; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
