import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { RunOptions } from './bench-types.js';
import { makeTempDir, registerCleanup, removeTempDir, spawnManaged } from './children.js';
import { freePort } from './free-port.js';
import { createScratchDatabase, type ScratchDatabase } from './postgres-db.js';
import { type Target, waitHealthy, watchChild } from './target.js';

const SWITCHYARD_BIN = fileURLToPath(new URL('../../../bin/switchyard.js', import.meta.url));

interface Source {
  readonly id: string;
  readonly writeKey: string;
}

/**
 * Starts `switchyard serve` on a fresh store (temp dir, or a scratch
 * PostgreSQL database) and creates one source through the admin API. The
 * store, the temp dir and the database go away with `stop()`, or on exit.
 */
export async function startSwitchyard(label: string, options: RunOptions, cpus: string | undefined): Promise<Target> {
  const dataDir = makeTempDir('switchyard-bench-');
  let database: ScratchDatabase | undefined;
  const cleanup = registerCleanup(async () => {
    removeTempDir(dataDir);
    await database?.drop();
  });

  try {
    if (options.store === 'postgres') database = await createScratchDatabase(options.postgresUrl);
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const adminToken = randomBytes(16).toString('hex');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'warn',
      // The bench says which store it measures; an inherited DATABASE_URL must not pick one silently.
      DATABASE_URL: database?.url ?? '',
    };
    const profiling = options.cpuProfileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir];
    // With the flag the bin runs the server in this very process instead of
    // re-running itself: the pid measured (CPU, threads, event loop) is the
    // server's, not a waiting parent's (every CPU figure read 0 without it).
    const child = spawnManaged(label, process.execPath, ['--no-node-snapshot', ...profiling, SWITCHYARD_BIN, 'serve'], { cpus, env });
    const target = watchChild(label, child, url, {}, cleanup);
    try {
      await waitHealthy(child, url, label);
      const source = await createSource(url, adminToken);
      const basic = Buffer.from(`${source.writeKey}:`).toString('base64');
      return { ...target, headers: { authorization: `Basic ${basic}` }, admin: { token: adminToken, sourceId: source.id } };
    } catch (error) {
      await target.stop();
      throw error;
    }
  } catch (error) {
    await cleanup();
    throw error;
  }
}

async function createSource(url: string, adminToken: string): Promise<Source> {
  const response = await fetch(`${url}/admin/v1/sources`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench' }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST /admin/v1/sources answered ${response.status}: ${text.slice(0, 500)}`);
  const source = JSON.parse(text) as Partial<Source>;
  if (typeof source.writeKey !== 'string' || typeof source.id !== 'string') {
    throw new Error(`POST /admin/v1/sources answered without id and writeKey: ${text.slice(0, 500)}`);
  }
  return { id: source.id, writeKey: source.writeKey };
}
