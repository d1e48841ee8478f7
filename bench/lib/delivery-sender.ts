/**
 * The client of delivery.latency, run as its own process: single
 * `POST /v1/track` calls at a fixed rate, each carrying its send time
 * (`properties.sentAtMs`) and whether it belongs to the warm-up or the
 * measured part (`properties.benchPhase`), for the receiver to time.
 *
 * Paced on an absolute schedule (message n is due at start + n / rate), so
 * a late tick sends the backlog at once instead of lowering the rate.
 *
 * Usage: node dist/bench/lib/delivery-sender.js '<SenderArgs JSON>'
 */
import { Agent } from 'undici';
import { LatencyHistogram } from './latency-histogram.js';
import { preciseNow, type SenderArgs, type SenderLine } from './delivery-protocol.js';
import { bodyFactory } from './payloads.js';

function send(line: SenderLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: delivery-sender <SenderArgs JSON>');
  const args = JSON.parse(raw) as SenderArgs;
  const target = new URL(args.url);
  const agent = new Agent({ connections: args.connections });
  const template = JSON.parse(bodyFactory({ kind: 'track' }, 'latency')()) as { messageId: string; userId: string; properties: Record<string, unknown> };
  const users = args.users ?? 5_000;
  /** The heavy user's (or its spread twin's) messages: no receiver times them. */
  const untimed = args.heavyUser !== undefined || args.spreadUsers !== undefined;

  const ingestLatency = new LatencyHistogram();
  let sequence = 0;
  let sentWarmup = 0;
  let sentMeasured = 0;
  let okMeasured = 0;
  let non2xx = 0;
  let errors = 0;
  let firstError: string | undefined;
  const pending = new Set<Promise<void>>();

  const post = (benchPhase: 'warmup' | 'measured'): void => {
    sequence += 1;
    const sentAtMs = preciseNow();
    template.messageId = `${args.idPrefix}-${sequence}`;
    template.userId = args.heavyUser ?? (args.spreadUsers !== undefined ? `other-${sequence % args.spreadUsers}` : `user-${sequence % users}`);
    template.properties['sentAtMs'] = sentAtMs;
    template.properties['benchPhase'] = untimed ? 'heavy' : benchPhase;
    if (untimed) template.properties['coupon'] = `heavy-${sequence}`;
    const body = JSON.stringify(template);
    if (benchPhase === 'measured') sentMeasured += 1;
    else sentWarmup += 1;
    const request = agent
      .request({
        origin: target.origin,
        path: '/v1/track',
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: args.authorization },
        body,
      })
      .then(async (response) => {
        await response.body.dump();
        if (response.statusCode >= 200 && response.statusCode < 300) {
          if (benchPhase === 'measured') {
            okMeasured += 1;
            ingestLatency.record(preciseNow() - sentAtMs);
          }
        } else {
          non2xx += 1;
        }
      })
      .catch((error: unknown) => {
        errors += 1;
        firstError ??= error instanceof Error ? error.message : String(error);
      })
      .finally(() => pending.delete(request));
    pending.add(request);
  };

  const intervalMs = 1000 / args.ratePerSec;
  let maxScheduleLagMs = 0;
  const runFor = async (seconds: number, benchPhase: 'warmup' | 'measured'): Promise<void> => {
    const total = Math.round(seconds * args.ratePerSec);
    const started = performance.now();
    let sent = 0;
    while (sent < total) {
      const elapsed = performance.now() - started;
      const due = Math.min(total, Math.floor(elapsed / intervalMs) + 1);
      if (due > sent) maxScheduleLagMs = Math.max(maxScheduleLagMs, elapsed - (due - 1) * intervalMs);
      while (sent < due) {
        post(benchPhase);
        sent += 1;
      }
      const nextAt = started + sent * intervalMs;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, nextAt - performance.now())));
    }
  };

  if (args.warmupSec > 0) await runFor(args.warmupSec, 'warmup');
  send({ event: 'measuring' });
  const cpuBefore = process.cpuUsage();
  await runFor(args.durationSec, 'measured');
  await Promise.all(pending);
  const cpu = process.cpuUsage(cpuBefore);
  await agent.close();
  send({
    event: 'result',
    sentWarmup,
    sentMeasured,
    okMeasured,
    non2xx,
    errors,
    firstError,
    maxScheduleLagMs: Math.round(maxScheduleLagMs * 100) / 100,
    ingestLatencyMs: ingestLatency.summary(),
    cpuSec: (cpu.user + cpu.system) / 1e6,
  });
}

main().catch((error: unknown) => {
  send({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
