import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { makeTempDir, removeTempDir } from './children.js';
import { pinned } from './cpu-plan.js';

const run = promisify(execFile);
const WRK = '/usr/bin/wrk';
const AUTOCANNON = fileURLToPath(new URL('../../../node_modules/.bin/autocannon', import.meta.url));

export interface LoadResult {
  readonly generator: 'wrk' | 'autocannon';
  /** Responses received during the run (any status). */
  readonly requests: number;
  /** Responses with a status other than 2xx/3xx. */
  readonly non2xx: number;
  readonly requestsPerSec: number;
  readonly p99Ms: number;
}

export interface LoadSpec {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly connections: number;
  readonly durationSec: number;
  /** taskset CPU list for the load generator; undefined runs it unpinned. */
  readonly cpus?: string | undefined;
}

/**
 * POSTs `body` at saturation for `durationSec`. Uses wrk when it is installed
 * (written in C, several threads: a one-core Node generator caps a fast
 * baseline), autocannon otherwise; the result says which ran.
 */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return existsSync(WRK) ? runWrk(spec) : runAutocannon(spec);
}

async function runWrk(spec: LoadSpec): Promise<LoadResult> {
  const dir = makeTempDir('switchyard-wrk-');
  try {
    const script = path.join(dir, 'post.lua');
    const lines = ['wrk.method = "POST"', `wrk.body = ${luaString(spec.body)}`, 'wrk.headers["Content-Type"] = "application/json"'];
    for (const [name, value] of Object.entries(spec.headers)) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`);
    writeFileSync(script, `${lines.join('\n')}\n`);
    const [file, args] = pinned(spec.cpus, WRK, [
      '-t2',
      `-c${spec.connections}`,
      `-d${Math.round(spec.durationSec)}s`,
      '--timeout',
      '10s',
      '--latency',
      '-s',
      script,
      spec.url,
    ]);
    const { stdout } = await run(file, args, { timeout: (spec.durationSec + 30) * 1000 });
    const requests = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN);
    const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0);
    const requestsPerSec = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN);
    const p99 = /^\s+99%\s+([\d.]+)(us|ms|s|m)\s*$/m.exec(stdout);
    if (Number.isNaN(requests) || Number.isNaN(requestsPerSec) || p99 === null) throw new Error(`unreadable wrk output:\n${stdout}`);
    const unitMs = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[p99[2] as 'us' | 'ms' | 's' | 'm'];
    return { generator: 'wrk', requests, non2xx, requestsPerSec, p99Ms: Number(p99[1]) * unitMs };
  } finally {
    removeTempDir(dir);
  }
}

async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const headerArgs = Object.entries({ 'content-type': 'application/json', ...spec.headers }).flatMap(([name, value]) => ['-H', `${name}=${value}`]);
  const [file, args] = pinned(spec.cpus, AUTOCANNON, [
    '-c',
    String(spec.connections),
    '-d',
    String(Math.round(spec.durationSec)),
    '-m',
    'POST',
    '-b',
    spec.body,
    ...headerArgs,
    '--json',
    spec.url,
  ]);
  const { stdout } = await run(file, args, { timeout: (spec.durationSec + 30) * 1000, maxBuffer: 16 * 1024 * 1024 });
  const result = JSON.parse(stdout) as { requests: { total: number; average: number }; latency: { p99: number }; non2xx: number; duration: number };
  return {
    generator: 'autocannon',
    requests: result.requests.total,
    non2xx: result.non2xx,
    requestsPerSec: result.requests.total / result.duration,
    p99Ms: result.latency.p99,
  };
}

function luaString(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}
