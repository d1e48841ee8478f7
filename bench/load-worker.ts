/**
 * Load generator, run as its own process (`node dist/bench/load-worker.js
 * '<LoadArgs JSON>'`) so that its CPU is never counted as the server's and
 * the runner's bookkeeping never slows the load. Protocol: lib/load-protocol.ts.
 */
import { createRequire } from 'node:module';
import { LatencyHistogram } from './lib/latency-histogram.js';
import type { LoadArgs, LoadResult, WorkerMessage } from './lib/load-protocol.js';
import { bodyFactory, payloadPath } from './lib/payloads.js';

/** The part of autocannon 8's API used here (it ships no type declarations). */
interface AutocannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  setupRequest?: (request: AutocannonRequest) => AutocannonRequest;
}

interface AutocannonOptions {
  url: string;
  connections: number;
  duration: number;
  sampleInt: number;
  timeout: number;
  requests: AutocannonRequest[];
}

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
}

interface AutocannonInstance {
  on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): void;
}

type Autocannon = (options: AutocannonOptions, done: (error: Error | null, result: AutocannonResult) => void) => AutocannonInstance;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

function send(message: WorkerMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

interface Phase {
  readonly result: AutocannonResult;
  readonly latency: LatencyHistogram;
}

function runPhase(args: LoadArgs, durationSec: number, nextBody: () => string): Promise<Phase> {
  const latency = new LatencyHistogram();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: args.url,
        connections: args.connections,
        duration: durationSec,
        // autocannon only notices the end of the duration at a sample tick (default every second).
        sampleInt: 100,
        timeout: 10,
        requests: [
          {
            method: 'POST',
            path: payloadPath(args.payload),
            headers: { 'content-type': 'application/json', ...args.headers },
            // autocannon hands over a fresh copy of the request each time, so setting the body in place is safe.
            setupRequest: (request) => {
              request.body = nextBody();
              return request;
            },
          },
        ],
      },
      (error, result) => (error ? reject(error) : resolve({ result, latency })),
    );
    instance.on('response', (_client, _status, _bytes, responseTime) => latency.record(responseTime));
  });
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: load-worker <LoadArgs JSON>');
  const args = JSON.parse(raw) as LoadArgs;

  if (args.warmupSec > 0) await runPhase(args, args.warmupSec, bodyFactory(args.payload, `${args.idPrefix}w`));
  send({ event: 'measuring' });

  const cpuBefore = process.cpuUsage();
  const { result, latency } = await runPhase(args, args.durationSec, bodyFactory(args.payload, `${args.idPrefix}m`));
  const cpu = process.cpuUsage(cpuBefore);

  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  const summary: LoadResult = {
    generator: 'autocannon',
    durationSec: result.duration,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    latency: latency.toJSON(),
    cpuSec: (cpu.user + cpu.system) / 1e6,
  };
  send({ event: 'result', ...summary });
}

main().catch((error: unknown) => {
  send({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
