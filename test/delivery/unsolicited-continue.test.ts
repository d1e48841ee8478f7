import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, type Socket, createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ContinueRewriter } from '../../src/delivery/unsolicited-continue.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, sourceWithWebhooks, waitForDelivery } from '../helpers/webhooks.js';

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

/**
 * A receiver written on a raw socket, as the faulty ones are: it answers every
 * complete request with `100 Continue` and then its 200, in the pieces
 * `split` cuts the answer into (each piece its own write, a turn apart).
 */
async function continueReceiver(split: (answer: string) => string[]): Promise<{ url: string; posts: string[]; close(): Promise<void> }> {
  const posts: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let pending = Buffer.alloc(0);
    socket.on('data', async (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = pending.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        posts.push(pending.subarray(end + 4, end + 4 + length).toString('utf8'));
        pending = pending.subarray(end + 4 + length);
        for (const piece of split(CONTINUE + OK)) {
          socket.write(piece);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    posts,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('a receiver that answers 100 Continue before its 200', () => {
  let sy: TestSwitchyard;
  const receivers: Array<{ close(): Promise<void> }> = [];

  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES });
  });
  after(async () => {
    await sy?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  const splits: Array<[string, (answer: string) => string[]]> = [
    ['in one write', (answer) => [answer]],
    ['the 100 and the 200 in two writes', () => [CONTINUE, OK]],
    ['its status line cut inside "100"', (answer) => [answer.slice(0, 10), answer.slice(10)]],
  ];
  for (const [what, split] of splits) {
    it(`gets each message once and the delivery succeeds with the 200 (${what})`, async () => {
      const receiver = await continueReceiver(split);
      receivers.push(receiver);
      const source = await sourceWithWebhooks(sy, [receiver.url]);
      // Two messages one after the other: the second reuses the keep-alive connection the first left.
      for (const n of [1, 2]) {
        assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'E', messageId: `m${n}` })).status, 200);
        await eventually(async () => {
          const all = await listDeliveries(sy, source.id);
          return all.length === n && all.every((d) => d.status !== 'pending') ? all : undefined;
        }, 10_000, `delivery ${n} to end`);
      }
      for (const delivery of await listDeliveries(sy, source.id)) {
        const detail = await waitForDelivery(sy, delivery.id, 'succeeded', 1);
        assert.deepEqual(detail.attempts.map((a: { statusCode?: number }) => a.statusCode), [200]);
      }
      assert.deepEqual(receiver.posts.map((body) => JSON.parse(body).messageId), ['m1', 'm2'], 'each POST once, no duplicates');
    });
  }
});

describe('ContinueRewriter', () => {
  const rewrite = (pieces: string[]): string => {
    const rewriter = new ContinueRewriter();
    return pieces
      .map((piece) => {
        const bytes = Buffer.from(piece, 'latin1');
        rewriter.rewrite(bytes);
        return bytes.toString('latin1');
      })
      .join('');
  };

  it('reads a 100 status line as 102 however the bytes are split, and leaves everything else alone', () => {
    const input = `${CONTINUE}HTTP/1.0 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nHHT${CONTINUE}`;
    const expected = input.replaceAll('HTTP/1.1 100', 'HTTP/1.1 102').replace('HTTP/1.0 100', 'HTTP/1.0 102');
    for (let cut = 0; cut <= input.length; cut++) {
      assert.equal(rewrite([input.slice(0, cut), input.slice(cut)]), expected, `cut at ${cut}`);
    }
    assert.equal(rewrite([OK, 'HTTP/1.1 101 Switching', 'HTTP/2 100']), `${OK}HTTP/1.1 101 SwitchingHTTP/2 100`);
  });
});
