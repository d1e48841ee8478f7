/**
 * Misbehaving clients next to normal ones: clients that pipeline requests
 * and read the answers very slowly, clients that send an endless chunked
 * body as fast as the server takes it, and one that trickles an endless
 * chunked body (lib/bad-clients.ts, in a process of their own). The
 * server's memory must stay bounded and normal clients must keep getting
 * 200s with sane latency.
 */
import { fileURLToPath } from 'node:url';
import { makeTempDir, removeTempDir, spawnManaged } from '../bench/lib/children.js';
import { freePort } from '../bench/lib/free-port.js';
import { type BadClientsArgs, type BadClientsReport, type ClientReport, PIPELINE_DEPTH, READ_BYTES_PER_SEC } from './lib/bad-clients-protocol.js';
import { check, round, type Scenario, sleep, summarize, verdictOf } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { createSource, startServer } from './lib/switchyard.js';

const BAD_CLIENTS_SCRIPT = fileURLToPath(new URL('./lib/bad-clients.js', import.meta.url));
const RSS_LIMIT_MB = 300;
const NORMAL_RATE_PER_SEC = 100;
const NORMAL_P99_LIMIT_MS = 500;
const SLOW_READERS = 20;
const FAST_ENDLESS = 4;

function sum(clients: readonly ClientReport[], field: 'sentMb' | 'readMb' | 'requests'): number {
  return round(clients.reduce((n, c) => n + c[field], 0), 3);
}

export const slowAndEndlessClients: Scenario = {
  name: 'slow-and-endless-clients',
  summary: `${SLOW_READERS} clients pipelining ${PIPELINE_DEPTH} calls and reading ${READ_BYTES_PER_SEC / 1024} KB/s, ${FAST_ENDLESS} endless chunked bodies and a trickling one, next to ${NORMAL_RATE_PER_SEC} normal calls/s`,
  timeoutSec: (quick) => (quick ? 60 : 150),
  async run({ quick, log, defer }) {
    const durationSec = quick ? 20 : 60;
    const dataDir = makeTempDir('switchyard-chaos-clients-');
    defer(() => removeTempDir(dataDir));
    const port = await freePort();
    const server = await startServer({ label: 'switchyard', dataDir, port });
    defer(() => server.kill());
    const source = await createSource(server.url, 'chaos-clients');
    log(`server ${server.url}; running for ${durationSec} s`);

    const started = Date.now();
    const normal = new PacedSender({ baseUrl: server.url, authorization: source.authorization, ratePerSec: NORMAL_RATE_PER_SEC, idPrefix: 'normal', timeoutMs: 5000 });
    normal.start();
    defer(() => normal.stop());
    let bad: BadClientsReport = { slowReaders: [], fastEndless: [], trickle: undefined };
    const args: BadClientsArgs = { port, authorization: source.authorization, slowReaders: SLOW_READERS, fastEndless: FAST_ENDLESS, trickle: true };
    const clients = spawnManaged('bad clients', process.execPath, [BAD_CLIENTS_SCRIPT, JSON.stringify(args)], {
      onStdoutLine: (line) => {
        try {
          bad = JSON.parse(line) as BadClientsReport;
        } catch {
          // not a report
        }
      },
    });
    defer(async () => {
      await clients.stop(2000);
    });

    for (let second = 5; second <= durationSec; second += 5) {
      await sleep(5000);
      log(
        `${second} s: server RSS peak ${server.peakRssMb()} MB; normal ${normal.count('200')}/${normal.sent} 200; ` +
          `slow readers sent ${sum(bad.slowReaders, 'requests')} requests, read ${sum(bad.slowReaders, 'readMb')} MB; endless bodies sent ${sum(bad.fastEndless, 'sentMb')} MB`,
      );
      if (server.exitedWith() !== undefined) break;
    }
    await normal.stop();
    await clients.stop(2000);
    const peakRssMb = server.peakRssMb() ?? 0;
    const died = server.exitedWith();
    let healthyAfter = false;
    try {
      healthyAfter = (await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(5000) })).status === 200;
    } catch {
      healthyAfter = false;
    }

    const okLatencies = normal.latencies.filter((l) => l.status === 200);
    const latency = summarize(okLatencies.map((l) => l.ms));
    // The endless bodies are answered at once, then drained by the server for a while: the first seconds.
    const firstSeconds = summarize(okLatencies.filter((l) => l.sentAtMs < started + 6000).map((l) => l.ms));
    const afterwards = summarize(okLatencies.filter((l) => l.sentAtMs >= started + 6000).map((l) => l.ms));
    const describe = (c: ClientReport | undefined): Record<string, unknown> =>
      c === undefined ? {} : { sentMb: c.sentMb, answer: c.answer, closedByServerAfterSec: c.closedByServerAfterSec ?? 'open until the client stopped' };
    const figures = {
      durationSec,
      serverPeakRssMb: peakRssMb,
      normal: { sent: normal.sent, ok: normal.count('200'), statuses: normal.statuses, skippedSlots: normal.skipped, latencyMs: latency },
      normalLatencyMsFirst6s: firstSeconds,
      normalLatencyMsAfter6s: afterwards,
      slowReaders: {
        clients: bad.slowReaders.length,
        requestsWritten: sum(bad.slowReaders, 'requests'),
        readMb: sum(bad.slowReaders, 'readMb'),
        closedByServer: bad.slowReaders.filter((c) => c.closedByServerAfterSec !== undefined).length,
      },
      endlessFast: bad.fastEndless.map(describe),
      endlessTrickle: describe(bad.trickle),
    };
    return verdictOf(
      [
        check('server alive', died === undefined && healthyAfter, died ?? (healthyAfter ? 'answers /healthz' : 'no /healthz answer afterwards')),
        check(`RSS below ${RSS_LIMIT_MB} MB`, peakRssMb > 0 && peakRssMb < RSS_LIMIT_MB, `peak ${peakRssMb} MB`),
        check('normal clients get 200', normal.sent > 0 && normal.count('200') === normal.sent, `${normal.count('200')}/${normal.sent}; ${JSON.stringify(normal.statuses)}`),
        check(`normal p99 below ${NORMAL_P99_LIMIT_MS} ms`, latency.p99 < NORMAL_P99_LIMIT_MS, `p50 ${latency.p50} ms, p99 ${latency.p99} ms, max ${latency.max} ms`),
      ],
      figures,
    );
  },
};
