/**
 * A function call's own cost, without store, delivery or network: CPU per
 * call of `FunctionRunner` (the sandbox, the isolate's `fetch` and its host
 * side up to the fetcher) with a fetcher that answers every request on the
 * next turn. A tool for changes to src/sandbox and src/functions, not a
 * bench with a target; `function.throughput` is the figure users see.
 *
 *   taskset -c 0 node dist/bench/function-calls.js [--calls N] [--in-flight N]
 *
 * Pin it to one CPU to measure as `npm run bench` runs the server (the
 * isolate's thread then shares the CPU with the main thread), and alternate
 * the builds compared (run the other build's dist/bench/function-calls.js).
 */
import { parseArgs } from 'node:util';
import { FunctionRunner } from '../src/functions/function-runner.js';
import { DEFAULT_FETCH_BOUNDS, type FunctionFetcher } from '../src/functions/function-fetch.js';
import { DEFAULT_SANDBOX_LIMITS } from '../src/sandbox/sandbox-limits.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '40000' }, 'in-flight': { type: 'string', default: '64' } } });
const CALLS = Math.max(1_000, Number(values.calls) || 40_000);
const IN_FLIGHT = Math.max(1, Number(values['in-flight']) || 64);

/** `function.throughput`'s handler. */
const CODE = `async function onTrack(event, settings) {
  const response = await fetch(settings.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(event) });
  if (response.status >= 500) throw new RetryError('the receiver answered ' + response.status);
  if (!response.ok) throw new Error('the receiver answered ' + response.status);
}`;

/** Answers as a small receiver would, on the next turn of the event loop. */
const fetcher = {
  limits: { timeoutMs: 10_000, allowPrivateReceivers: true, userAgent: 'switchyard-bench', ...DEFAULT_FETCH_BOUNDS },
  send(_request: unknown, done: (answer: unknown) => void) {
    const handle = { ended: false, end: () => undefined };
    setImmediate(() => {
      handle.ended = true;
      done({ status: 200, statusText: 'OK', headers: [['content-type', 'text/plain'], ['content-length', '2'], ['connection', 'keep-alive']], body: 'ok' });
    });
    return handle;
  },
} as unknown as FunctionFetcher;

const event = JSON.stringify({
  type: 'track',
  event: 'Order Completed',
  userId: 'user-123',
  anonymousId: 'anon-4567',
  messageId: 'msg-0000000001',
  timestamp: '2026-11-28T01:00:00.000Z',
  properties: { orderId: 'o-1', total: 42.5, currency: 'USD', products: [{ id: 'p1', name: 'Thing', price: 21.25, quantity: 2 }] },
  context: { library: { name: 'analytics-node', version: '2.1.0' }, ip: '10.0.0.1', userAgent: 'Mozilla/5.0 (X11; Linux x86_64)' },
});
const settings = { url: 'http://127.0.0.1:9/hook', apiKey: 'sk_live_abcdefgh' };
const fn = { id: 'fn_bench', version: 1, code: CODE };
const runner = new FunctionRunner(DEFAULT_SANDBOX_LIMITS, fetcher, undefined, IN_FLIGHT);

async function drive(calls: number): Promise<number> {
  let started = 0;
  let failed = 0;
  const worker = async (): Promise<void> => {
    while (started < calls) {
      started++;
      const result = await runner.run(fn, event, settings, { type: 'track' });
      if (result.outcome !== 'delivered') failed++;
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return failed;
}

await drive(Math.min(CALLS, 10_000)); // warm-up: the isolate loaded, both threads' code optimized
const cpu = process.cpuUsage();
const wall = performance.now();
const failed = await drive(CALLS);
const used = process.cpuUsage(cpu);
const perCall = (micros: number): string => (micros / CALLS).toFixed(1);
process.stdout.write(
  `${CALLS} calls, ${IN_FLIGHT} in flight: ${perCall(used.user + used.system)} µs of CPU a call (user ${perCall(used.user)}, system ${perCall(used.system)}), ` +
    `${perCall((performance.now() - wall) * 1000)} µs of wall time; ${failed} not delivered\n`,
);
runner.dispose();
process.exitCode = failed === 0 ? 0 : 1;
