/**
 * Switchyard as a child process for the chaos scenarios: started on a data
 * dir the scenario owns (so that it can be killed and restarted on the same
 * store), on a port fixed across restarts, with the bench's process helpers.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { type ManagedChild, spawnManaged } from '../../bench/lib/children.js';
import { MemorySampler } from '../../bench/lib/proc-stats.js';
import { lastLines, waitHealthy } from '../../bench/lib/target.js';

const SWITCHYARD_BIN = fileURLToPath(new URL('../../../bin/switchyard.js', import.meta.url));

export const ADMIN_TOKEN = `chaos-${randomBytes(12).toString('hex')}`;

export interface ServerOptions {
  readonly label: string;
  readonly dataDir: string;
  readonly port: number;
  /** Extra SWITCHYARD_* settings. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface Server {
  readonly url: string;
  readonly pid: number;
  readonly child: ManagedChild;
  /** Peak RSS of this process so far, MB. */
  peakRssMb(): number | undefined;
  /** Why it died, if it did. */
  exitedWith(): string | undefined;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export async function startServer(options: ServerOptions): Promise<Server> {
  const url = `http://127.0.0.1:${options.port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(options.port),
    HOST: '127.0.0.1',
    SWITCHYARD_DATA_DIR: options.dataDir,
    SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN,
    SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
    LOG_LEVEL: 'warn',
    // Chaos runs on SQLite in a temp dir; an inherited DATABASE_URL must not pick PostgreSQL.
    DATABASE_URL: '',
    ...options.env,
  };
  const child = spawnManaged(options.label, process.execPath, [SWITCHYARD_BIN, 'serve'], { env });
  const memory = new MemorySampler(child.pid, 250);
  try {
    await waitHealthy(child, url, options.label);
  } catch (error) {
    memory.stop();
    throw error;
  }
  return {
    url,
    pid: child.pid,
    child,
    peakRssMb: () => memory.peakMb(),
    exitedWith: () => {
      const status = child.exitStatus();
      return status === undefined ? undefined : `exit ${status.code ?? status.signal}: ${lastLines(child.outputTail(), 8)}`;
    },
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      memory.stop();
      if (child.exitStatus() !== undefined) return;
      if (signal === 'SIGKILL') {
        process.kill(child.pid, 'SIGKILL');
        await child.exited;
      } else {
        await child.stop(5000);
      }
    },
  };
}

export interface Source {
  readonly id: string;
  readonly writeKey: string;
  /** `Basic …` */
  readonly authorization: string;
}

/** One admin API call; throws unless it answers `expect`. */
export async function admin(url: string, method: string, path: string, body: unknown, expect: number): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== expect) throw new Error(`${method} /admin/v1${path} answered ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Creates a source and, with `hookUrl`, its Webhooks destination pointing there. */
export async function createSource(url: string, name: string, hookUrl?: string): Promise<Source> {
  const created = await admin(url, 'POST', '/sources', { name }, 201);
  const id = String(created['id']);
  const writeKey = String(created['writeKey']);
  if (hookUrl !== undefined) {
    await admin(url, 'PUT', `/sources/${id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: hookUrl }], sharedSecret: 'chaos' } }, 200);
  }
  return { id, writeKey, authorization: `Basic ${Buffer.from(`${writeKey}:`).toString('base64')}` };
}
