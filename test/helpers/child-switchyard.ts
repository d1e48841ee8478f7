import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { TEST_ADMIN_TOKEN, eventually } from './switchyard.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

/** A free loopback port (the OS picks one, we release it for the child). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

export interface ChildSwitchyard {
  readonly url: string;
  readonly process: ChildProcess;
  /** Everything the child wrote to stdout and stderr so far. */
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs `switchyard serve` as a separate process (so it can be killed with
 * SIGKILL) and resolves once it answers /healthz.
 */
export async function startChildSwitchyard(env: Record<string, string>, port?: number): Promise<ChildSwitchyard> {
  const listenPort = port ?? (await freePort());
  const child = spawn(process.execPath, ['--no-node-snapshot', BIN, 'serve'], {
    env: {
      PATH: process.env['PATH'] ?? '',
      HOST: '127.0.0.1',
      PORT: String(listenPort),
      SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit');
  const url = `http://127.0.0.1:${listenPort}`;
  try {
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`switchyard exited with ${child.exitCode}:\n${output}`);
      try {
        return (await fetch(`${url}/healthz`)).ok ? true : undefined;
      } catch {
        return undefined;
      }
    }, 20_000, 'switchyard to answer /healthz');
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    url,
    process: child,
    output: () => output,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        await exited;
      }
    },
  };
}

/**
 * After a kill: starts `serve` again on the SQLite data folder, waits until
 * its processing stage has made messages of every raw request left (a 200
 * means stored raw), and stops it. Resolves how many raw requests were left
 * unprocessed by the kill.
 */
export async function processLeftovers(env: Record<string, string>, dataDir: string): Promise<number> {
  const store = SqliteStore.open({ dataDir, durability: 'process' });
  try {
    await store.migrate();
    const left = (await store.rawBacklog()).requests;
    const server = await startChildSwitchyard(env);
    try {
      await eventually(async () => ((await store.rawBacklog()).requests === 0 ? true : undefined), 60_000, 'the raw requests left by the kill to be processed');
    } finally {
      await server.kill('SIGKILL');
    }
    return left;
  } finally {
    await store.close();
  }
}
