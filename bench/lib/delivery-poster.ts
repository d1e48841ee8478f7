/**
 * The baseline of delivery.throughput, run as its own process in
 * Switchyard's place: bare undici POSTs of the very bodies Switchyard would
 * deliver, with the same headers (User-Agent, Content-Type and an
 * X-Signature computed before the clock starts), through the same kind of
 * undici Agent, at the same number of requests in flight per receiver.
 * Nothing is read from a store and nothing is recorded.
 *
 * Usage: node dist/bench/lib/delivery-poster.js '<PosterArgs JSON>'
 */
import { Agent } from 'undici';
import { signBody } from '../../src/delivery/signer.js';
import { webhookBodyMaker } from './delivery-bodies.js';
import { type PosterArgs, type PosterLine, PostTally } from './delivery-protocol.js';

function send(line: PosterLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: delivery-poster <PosterArgs JSON>');
  const args = JSON.parse(raw) as PosterArgs;

  const prepareStarted = performance.now();
  const makeBody = webhookBodyMaker({ idPrefix: args.idPrefix, receivedAt: args.receivedAt });
  const bodies: string[] = new Array<string>(args.count);
  const signatures: string[] = new Array<string>(args.count);
  for (let i = 0; i < args.count; i++) {
    const body = makeBody(i);
    bodies[i] = body;
    signatures[i] = signBody(body, args.sharedSecret);
  }
  send({ event: 'ready', prepareSec: Math.round(performance.now() - prepareStarted) / 1000 });

  const target = new URL(args.url);
  // As WebhookSender: one keep-alive pool per origin with `concurrency` connections.
  const agent = new Agent({ connections: args.concurrency });
  let next = 0;
  const tally = new PostTally();

  const lane = async (): Promise<void> => {
    for (let i = next++; i < args.count; i = next++) {
      try {
        const response = await agent.request({
          origin: target.origin,
          path: target.pathname,
          method: 'POST',
          headers: { 'user-agent': args.userAgent, 'content-type': 'application/json', 'x-signature': signatures[i]! },
          body: bodies[i]!,
        });
        await response.body.dump();
        tally.record(response.statusCode);
      } catch (error) {
        tally.record(error);
      }
    }
  };
  await Promise.all(Array.from({ length: args.concurrency }, lane));

  const done = tally.done();
  await agent.close();
  send(done);
}

main().catch((error: unknown) => {
  send({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
