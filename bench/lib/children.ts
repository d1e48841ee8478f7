import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface ManagedChild {
  readonly label: string;
  readonly pid: number;
  readonly exited: Promise<ExitStatus>;
  /** Set once the process has exited. */
  exitStatus(): ExitStatus | undefined;
  /** The last few KB of stdout and stderr, to explain a failure. */
  outputTail(): string;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<ExitStatus>;
}

export interface SpawnOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** taskset CPU list; undefined runs unpinned. */
  readonly cpus?: string | undefined;
  readonly onStdoutLine?: (line: string) => void;
}

/** The command line that runs `command` on the given CPUs (a plan's taskset list, see cpu-plan.ts), or unpinned. */
export function pinned(cpus: string | undefined, command: string, args: readonly string[]): [string, string[]] {
  return cpus === undefined ? [command, [...args]] : ['taskset', ['-c', cpus, command, ...args]];
}

const TAIL_BYTES = 8192;
const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();
const cleanups: Array<() => Promise<void>> = [];

/**
 * Spawns a child that is killed when the runner exits, however it exits: a
 * benchmark that leaves a server bound to a port or a load generator running
 * poisons the next run's numbers.
 */
export function spawnManaged(label: string, command: string, args: readonly string[], options: SpawnOptions = {}): ManagedChild {
  const [file, argv] = pinned(options.cpus, command, args);
  const child = spawn(file, argv, { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) {
    // The reason arrives as an 'error' event; without a listener it would crash the runner instead.
    child.once('error', () => {});
    throw new Error(`${label}: could not start ${file}`);
  }
  live.add(child);

  let tail = '';
  const keep = (chunk: string): void => {
    tail = (tail + chunk).slice(-TAIL_BYTES);
  };
  // Both pipes must be drained, or a chatty child blocks on a full pipe and the bench measures that.
  child.stderr.setEncoding('utf8').on('data', keep);
  if (options.onStdoutLine === undefined) {
    child.stdout.setEncoding('utf8').on('data', keep);
  } else {
    const onLine = options.onStdoutLine;
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
      keep(`${line}\n`);
      onLine(line);
    });
  }

  let status: ExitStatus | undefined;
  const exited = new Promise<ExitStatus>((resolve) => {
    // 'close', not 'exit': the last lines of stdout may still be in flight at 'exit'.
    child.once('close', (code, signal) => {
      status = { code, signal };
      live.delete(child);
      resolve(status);
    });
    child.once('error', (error) => {
      keep(`\n[spawn error] ${error.message}\n`);
      status = { code: null, signal: null };
      live.delete(child);
      resolve(status);
    });
  });

  const stop = async (graceMs = 5000): Promise<ExitStatus> => {
    if (status !== undefined) return status;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };

  return { label, pid: child.pid, exited, exitStatus: () => status, outputTail: () => tail, stop };
}

/** A fresh directory under the OS temp dir, removed when the runner exits. */
export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

/**
 * Registers asynchronous cleanup (dropping a scratch database) for an
 * interrupted run; the returned function runs it now, at most once.
 */
export function registerCleanup(action: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  const once = (): Promise<void> => (done ??= action());
  cleanups.push(once);
  return once;
}

/** Runs every registered cleanup, newest first, swallowing their errors. */
export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const action = cleanups.pop();
    try {
      await action?.();
    } catch (error) {
      process.stderr.write(`[bench] cleanup failed: ${String(error)}\n`);
    }
  }
}

/** Children and temp dirs go away on normal exit, on an uncaught error and on Ctrl-C. */
export function installExitHandlers(): void {
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });
  const interrupt = (signal: NodeJS.Signals): void => {
    process.stderr.write(`[bench] ${signal}: stopping children and cleaning up\n`);
    for (const child of live) child.kill('SIGTERM');
    const deadline = setTimeout(() => process.exit(130), 10_000);
    deadline.unref();
    void runCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
}
