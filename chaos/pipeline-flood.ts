/**
 * Clients that pipeline thousands of calls and never read an answer, beside
 * clients that trickle a body a few bytes a second (lib/flood-clients.ts, in
 * a process of their own), next to normal clients, `/healthz` and the admin
 * API. The server must keep answering all three and cut the attackers.
 */
import { fileURLToPath } from 'node:url';
import { makeTempDir, removeTempDir, spawnManaged } from '../bench/lib/children.js';
import { freePort } from '../bench/lib/free-port.js';
import type { FloodArgs, FloodReport } from './lib/flood-clients.js';
import { check, type Scenario, sleep, summarize, verdictOf } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { Probe } from './lib/probe.js';
import { ADMIN_TOKEN, createSource, startServer } from './lib/switchyard.js';

const FLOOD_SCRIPT = fileURLToPath(new URL('./lib/flood-clients.js', import.meta.url));
const NORMAL_RATE_PER_SEC = 100;
const NORMAL_P99_LIMIT_MS = 500;
const PROBE_TIMEOUT_MS = 2_000;

export const pipelineFlood: Scenario = {
  name: 'pipeline-flood',
  summary: `50 connections pipelining 20,000 calls each without reading an answer and 50 trickling bodies, next to ${NORMAL_RATE_PER_SEC} normal calls/s, /healthz and the admin API`,
  timeoutSec: (quick) => (quick ? 60 : 120),
  async run({ quick, log, defer }) {
    // Long enough, even quick, for the 30 s request timeout to cut the trickling bodies.
    const durationSec = quick ? 40 : 60;
    const dataDir = makeTempDir('switchyard-chaos-flood-');
    defer(() => removeTempDir(dataDir));
    const port = await freePort();
    const server = await startServer({ label: 'switchyard', dataDir, port });
    defer(() => server.kill());
    const source = await createSource(server.url, 'chaos-flood');
    log(`server ${server.url}; running for ${durationSec} s`);

    const normal = new PacedSender({ baseUrl: server.url, authorization: source.authorization, ratePerSec: NORMAL_RATE_PER_SEC, idPrefix: 'normal', timeoutMs: 10_000 });
    const health = new Probe(`${server.url}/healthz`, { everyMs: 250, timeoutMs: PROBE_TIMEOUT_MS });
    const admin = new Probe(`${server.url}/admin/v1/sources`, { everyMs: 1_000, timeoutMs: PROBE_TIMEOUT_MS, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const args: FloodArgs = { port, authorization: source.authorization, pipeliners: 50, requestsEach: 20_000, tricklers: 50 };
    let flood: FloodReport | undefined;
    const attackers = spawnManaged('flood clients', process.execPath, [FLOOD_SCRIPT, JSON.stringify(args)], {
      onStdoutLine: (line) => {
        try {
          flood = JSON.parse(line) as FloodReport;
        } catch {
          // not a report
        }
      },
    });
    defer(async () => {
      await attackers.stop(2000);
    });
    normal.start();
    health.start();
    admin.start();
    defer(() => normal.stop());

    for (let second = 5; second <= durationSec; second += 5) {
      await sleep(5000);
      log(
        `${second} s: normal ${normal.count('200')}/${normal.sent} 200, p99 ${summarize(normal.latencies.map((l) => l.ms)).p99} ms; ` +
          `/healthz failed ${health.failures}/${health.asked}; admin failed ${admin.failures}/${admin.asked}; RSS peak ${server.peakRssMb()} MB; attackers ${JSON.stringify(flood)}`,
      );
      if (server.exitedWith() !== undefined) break;
    }
    await Promise.all([normal.stop(), health.stop(), admin.stop()]);
    await attackers.stop(2000);
    const died = server.exitedWith();
    // A client that reads nothing does not see a cut; the server counts them.
    const cuts = died === undefined ? await connectionsCut(server.url) : {};

    const latency = summarize(normal.latencies.filter((l) => l.status === 200).map((l) => l.ms));
    const figures = {
      durationSec,
      attack: args,
      attackers: flood,
      connectionsCut: cuts,
      serverPeakRssMb: server.peakRssMb(),
      normal: { sent: normal.sent, statuses: normal.statuses, skippedSlots: normal.skipped, latencyMs: latency },
      healthz: { asked: health.asked, failed: health.failures, firstFailure: health.firstFailure, latencyMs: health.summary() },
      admin: { asked: admin.asked, failed: admin.failures, firstFailure: admin.firstFailure, latencyMs: admin.summary() },
    };
    return verdictOf(
      [
        check('server alive', died === undefined, died ?? 'running'),
        check('/healthz never failed', health.asked > 0 && health.failures === 0, `${health.failures}/${health.asked} failed (timeout ${PROBE_TIMEOUT_MS} ms); max ${health.summary().max} ms`),
        check('admin API never failed', admin.asked > 0 && admin.failures === 0, `${admin.failures}/${admin.asked} failed; max ${admin.summary().max} ms`),
        check('normal clients get 200', normal.sent > 0 && normal.count('200') === normal.sent, `${normal.count('200')}/${normal.sent}; ${JSON.stringify(normal.statuses)}`),
        check(`normal p99 below ${NORMAL_P99_LIMIT_MS} ms`, latency.p99 < NORMAL_P99_LIMIT_MS, `p50 ${latency.p50} ms, p99 ${latency.p99} ms, max ${latency.max} ms`),
        check(
          'attackers cut',
          (cuts['pipeline_too_deep'] ?? 0) + (cuts['stalled'] ?? 0) === args.pipeliners && flood?.tricklersCut === args.tricklers,
          `pipeliners cut by the server: ${JSON.stringify(cuts)}; tricklers cut: ${flood?.tricklersCut ?? 0}/${args.tricklers}, last after ${flood?.lastCutAfterSec} s`,
        ),
      ],
      figures,
    );
  },
};

/** `switchyard_http_connections_cut_total` by reason, from /metrics. */
async function connectionsCut(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const cuts: Record<string, number> = {};
  for (const match of text.matchAll(/^switchyard_http_connections_cut_total\{reason="([a-z_]+)"\} (\d+)$/gm)) cuts[match[1]!] = Number(match[2]);
  return cuts;
}
