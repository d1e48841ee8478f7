/**
 * The webhook receiver of the delivery benches, run as its own process:
 * a bare node:http server that counts POSTs to /hook and answers 200 as
 * soon as the body is in. Progress goes to stdout (lib/delivery-protocol.ts);
 * the bench controls phases through /_bench/reset and reads /_bench/stats.
 *
 * Usage: node dist/bench/lib/delivery-receiver.js   (listens on 127.0.0.1, port chosen by the OS)
 */
import http from 'node:http';
import { LatencyHistogram } from './latency-histogram.js';
import { HOOK_PATH, preciseNow, type ReceiverLine, type ReceiverReset, type ReceiverStats } from './delivery-protocol.js';

const PROGRESS_MS = 50;

function send(line: ReceiverLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

let phase = 'idle';
let count = 0;
let signed = 0;
let measured = 0;
let firstAt: number | undefined;
let lastAt: number | undefined;
let marks = new Set<number>();
let latency: LatencyHistogram | undefined;
let histogram = new LatencyHistogram();
/** `engage-syncs` only: send → the sync's `timestamp` (see ReceiverStats.computedMs). */
let computedHistogram = new LatencyHistogram();
let slowMs = Infinity;
let latencyOf: NonNullable<ReceiverReset['latencyOf']> = 'messages';
let firstSentAt: number | undefined;
let perSecond: Array<{ second: number; messages: number; slow: number; maxMs: number }> = [];

function reset(request: ReceiverReset): void {
  phase = request.phase;
  count = 0;
  signed = 0;
  measured = 0;
  firstAt = undefined;
  lastAt = undefined;
  marks = new Set(request.marks);
  histogram = new LatencyHistogram();
  computedHistogram = new LatencyHistogram();
  latency = request.latency ? histogram : undefined;
  slowMs = request.slowMs ?? Infinity;
  latencyOf = request.latencyOf ?? 'messages';
  firstSentAt = undefined;
  perSecond = [];
}

function recordLatency(now: number, sentAtMs: number): void {
  const ms = Math.max(0, now - sentAtMs);
  histogram.record(ms);
  firstSentAt ??= sentAtMs;
  const second = Math.max(0, Math.floor((sentAtMs - firstSentAt) / 1000));
  let bucket = perSecond[second];
  if (bucket === undefined) {
    for (let i = perSecond.length; i <= second; i++) perSecond[i] = { second: i, messages: 0, slow: 0, maxMs: 0 };
    bucket = perSecond[second]!;
  }
  bucket.messages += 1;
  if (ms > slowMs) bucket.slow += 1;
  if (ms > bucket.maxMs) bucket.maxMs = Math.round(ms * 100) / 100;
}

function stats(): ReceiverStats {
  const cpu = process.cpuUsage();
  return { phase, count, signed, firstAt, lastAt, measured, latencyMs: histogram.summary(), ...(latencyOf === 'engage-syncs' && { computedMs: computedHistogram.summary() }), perSecond, cpuSec: (cpu.user + cpu.system) / 1e6 };
}

function answer(response: http.ServerResponse, status: number, body: string): void {
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

interface BenchBody {
  readonly timestamp?: unknown;
  readonly properties?: { readonly sentAtMs?: unknown; readonly benchPhase?: unknown };
  readonly traits?: { readonly bench_sent_at_ms?: unknown };
  readonly context?: { readonly personas?: unknown };
}

/** The send time to time this POST by, or undefined when the phase does not time it. */
function measuredSendTime(body: BenchBody): number | undefined {
  if (latencyOf === 'engage-syncs') {
    const sentAtMs = body.traits?.bench_sent_at_ms;
    return body.context?.personas !== undefined && typeof sentAtMs === 'number' ? sentAtMs : undefined;
  }
  const properties = body.properties;
  return properties?.benchPhase === 'measured' && typeof properties.sentAtMs === 'number' ? properties.sentAtMs : undefined;
}

/** An Engage sync's `timestamp` (the moment its change was computed), ms since the epoch, or undefined. */
function computedTime(body: BenchBody): number | undefined {
  const at = typeof body.timestamp === 'string' ? Date.parse(body.timestamp) : NaN;
  return Number.isFinite(at) ? at : undefined;
}

function onHook(request: http.IncomingMessage, response: http.ServerResponse): void {
  const chunks: Buffer[] | undefined = latency === undefined ? undefined : [];
  if (request.headers['x-signature'] !== undefined) signed += 1;
  request.on('data', (chunk: Buffer) => chunks?.push(chunk));
  request.on('end', () => {
    const now = preciseNow();
    count += 1;
    firstAt ??= now;
    lastAt = now;
    if (marks.has(count)) send({ event: 'mark', phase, count, at: now });
    if (chunks !== undefined && latency !== undefined) {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as BenchBody;
        const sentAtMs = measuredSendTime(body);
        if (sentAtMs !== undefined) {
          measured += 1;
          recordLatency(now, sentAtMs);
          const computedAt = latencyOf === 'engage-syncs' ? computedTime(body) : undefined;
          if (computedAt !== undefined) computedHistogram.record(Math.max(0, computedAt - sentAtMs));
        }
      } catch {
        // Not ours: counted, not timed.
      }
    }
    answer(response, 200, '{}');
  });
}

function onControl(request: http.IncomingMessage, response: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    if (request.method === 'POST' && request.url === '/_bench/reset') {
      try {
        reset(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ReceiverReset);
      } catch (error) {
        return answer(response, 400, JSON.stringify({ error: String(error) }));
      }
      return answer(response, 200, JSON.stringify(stats()));
    }
    if (request.url === '/_bench/stats') return answer(response, 200, JSON.stringify(stats()));
    if (request.url === '/healthz') return answer(response, 200, '{"status":"ok"}');
    answer(response, 404, '{}');
  });
}

const server = http.createServer((request, response) => {
  if (request.method === 'POST' && request.url === HOOK_PATH) onHook(request, response);
  else onControl(request, response);
});
server.keepAliveTimeout = 72_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  send({ event: 'listening', port: typeof address === 'object' && address !== null ? address.port : 0 });
});

const ticker = setInterval(() => {
  if (phase !== 'idle') send({ event: 'progress', phase, count, at: preciseNow() });
}, PROGRESS_MS);

const shutdown = (): void => {
  clearInterval(ticker);
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
