import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let clockTicks: number | undefined;

/** USER_HZ, the unit of the CPU times in /proc/<pid>/stat (almost always 100). */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds (user + system, all threads) a process has used so far; undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/**
 * CPU seconds a process's main thread alone has used so far (its thread id
 * is the process id). In `switchyard serve` that is the thread that answers
 * HTTP: ingest alone while a stage thread runs the later stages, every stage
 * with `--workers 0`.
 */
export function mainThreadCpuSeconds(pid: number): number | undefined {
  return statCpuSeconds(`/proc/${pid}/task/${pid}/stat`);
}

/**
 * Seconds the main thread of process `pid` has spent runnable but waiting
 * for a CPU (`/proc/<pid>/task/<pid>/schedstat`, second field): how long
 * the scheduler, not the thread's own work, held it up. Undefined where
 * the kernel keeps no schedstat.
 */
export function mainThreadRunQueueSeconds(pid: number): number | undefined {
  try {
    const waited = Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]);
    return Number.isNaN(waited) ? undefined : waited / 1e9;
  } catch {
    return undefined;
  }
}

function statCpuSeconds(file: string): number | undefined {
  try {
    const stat = readFileSync(file, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    if (Number.isNaN(utime) || Number.isNaN(stime)) return undefined;
    return (utime + stime) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

interface Memory {
  readonly rssKb: number;
  readonly peakKb: number;
}

function memory(pid: number): Memory | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`^${field}:\\s*(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return { rssKb: kb('VmRSS'), peakKb: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

/**
 * Peak resident memory of a child. VmHWM is the kernel's own high-water
 * mark, so no short spike between samples is missed; the periodic samples
 * keep a figure when the process dies before it can be read at the end.
 */
export class MemorySampler {
  private peakKb = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pid: number, intervalMs = 200) {
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
    this.sample();
  }

  private sample(): void {
    const now = memory(this.pid);
    if (now !== undefined) this.peakKb = Math.max(this.peakKb, now.rssKb, now.peakKb);
  }

  /** Peak RSS so far, in MB (undefined when /proc could not be read). */
  peakMb(): number | undefined {
    this.sample();
    return this.peakKb === 0 ? undefined : Math.round(this.peakKb / 102.4) / 10;
  }

  stop(): void {
    this.sample();
    clearInterval(this.timer);
  }
}

export interface MachineCpu {
  /** CPU seconds spent busy, summed over every CPU. */
  readonly busySec: number;
  /** CPU seconds the hypervisor gave to other guests while this one wanted to run. */
  readonly stealSec: number;
}

/** Machine-wide CPU counters from /proc/stat; undefined where there is none. */
export function machineCpu(): MachineCpu | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    const [user, nice, system, _idle, _iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    const busy = [user, nice, system, irq, softirq].reduce<number>((sum, value) => sum + (value ?? 0), 0);
    return { busySec: busy / ticksPerSecond(), stealSec: (steal ?? 0) / ticksPerSecond() };
  } catch {
    return undefined;
  }
}
