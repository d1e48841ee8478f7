import { fileURLToPath } from 'node:url';
import { type ManagedChild, spawnManaged } from './children.js';
import { freePort } from './free-port.js';
import { cpuSeconds, MemorySampler } from './proc-stats.js';

/** A server under load: where to send requests and how to watch its process. */
export interface Target {
  readonly label: string;
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** Headers every request needs (the write key, for Switchyard). */
  readonly headers: Readonly<Record<string, string>>;
  /** Switchyard only: the admin token and the bench source, for benches that use the admin API. */
  readonly admin?: { readonly token: string; readonly sourceId: string };
  readonly pid: number;
  /** CPU seconds used so far; undefined once the process is gone. */
  cpuSeconds(): number | undefined;
  peakRssMb(): number | undefined;
  /** Why the process died, when it has; a phase against a dead server is an error, not a figure. */
  failure(): string | undefined;
  stop(): Promise<void>;
}

const BASELINE_SCRIPT = fileURLToPath(new URL('./baseline-server.js', import.meta.url));
const HEALTH_TIMEOUT_MS = 30_000;

/** Wraps a started child; `extraStop` runs after the process has exited. */
export function watchChild(
  label: string,
  child: ManagedChild,
  url: string,
  headers: Readonly<Record<string, string>>,
  extraStop: () => Promise<void> = async () => {},
): Target {
  const memory = new MemorySampler(child.pid);
  let stopping = false;
  return {
    label,
    url,
    headers,
    pid: child.pid,
    cpuSeconds: () => cpuSeconds(child.pid),
    peakRssMb: () => memory.peakMb(),
    failure: () => {
      const status = child.exitStatus();
      if (status === undefined || stopping) return undefined;
      return `${label} exited while the bench was still using it (code ${status.code ?? status.signal}): ${lastLines(child.outputTail())}`;
    },
    stop: async () => {
      stopping = true;
      memory.stop();
      await child.stop();
      await extraStop();
    },
  };
}

/** Polls `GET /healthz` until it answers 200; fails early if the process dies. */
export async function waitHealthy(child: ManagedChild, url: string, label: string): Promise<void> {
  const deadline = Date.now() + HEALTH_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const status = child.exitStatus();
    if (status !== undefined) {
      throw new Error(`${label} exited before it was healthy (code ${status.code ?? status.signal}): ${lastLines(child.outputTail())}`);
    }
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await child.stop(1000);
  throw new Error(`${label} did not answer GET /healthz with 200 within ${HEALTH_TIMEOUT_MS} ms: ${lastLines(child.outputTail())}`);
}

export async function startBaseline(label: string, cpus: string | undefined): Promise<Target> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawnManaged(label, process.execPath, [BASELINE_SCRIPT], {
    cpus,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1' },
  });
  await waitHealthy(child, url, label);
  return watchChild(label, child, url, {});
}

export function lastLines(text: string, count = 15): string {
  const lines = text.trimEnd().split('\n');
  return lines.slice(-count).join('\n') || '(no output)';
}
