import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, type RequestListener, type ServerResponse, createServer } from 'node:http';
import { type AddressInfo, Socket, connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { startFlood } from '../../chaos/lib/flood-clients.js';
import { ConnectionGuard, type ConnectionLimits } from '../../src/http/connection-guard.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const LIMITS: ConnectionLimits = { maxInFlight: 4, maxWaiting: 16, stallMs: 300, checkEveryMs: 50 };

/** A plain Node server behind the guard; `handle` answers each request. */
async function guarded(handle: (request: IncomingMessage, response: ServerResponse) => void): Promise<{ port: number; guard: ConnectionGuard; handled: () => number; close(): Promise<void> }> {
  const guard = new ConnectionGuard(LIMITS);
  let handled = 0;
  const listener: RequestListener = (request, response) => {
    handled++;
    handle(request, response);
  };
  const server = createServer(guard.wrap(listener));
  guard.attach(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    guard,
    handled: () => handled,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

function pipelined(count: number, path = '/'): string {
  return Array.from({ length: count }, (_, i) => `GET ${path}?n=${i} HTTP/1.1\r\nHost: x\r\n\r\n`).join('');
}

async function closed(socket: Socket): Promise<void> {
  if (!socket.destroyed) await once(socket, 'close');
}

describe('ConnectionGuard', () => {
  it('answers a pipeline that fits, in order, to a client that reads', async () => {
    const server = await guarded((request, response) => setTimeout(() => response.end(`${request.url}\n`), 2));
    try {
      const socket = connect(server.port, '127.0.0.1');
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.write(pipelined(LIMITS.maxInFlight + LIMITS.maxWaiting));
      const answers = await eventually(() => {
        const bodies = text.split('\r\n\r\n').slice(1).map((part) => part.split('\n')[0]);
        return bodies.length === 20 ? bodies : undefined;
      });
      assert.deepEqual(answers, Array.from({ length: 20 }, (_, i) => `/?n=${i}`));
      // Reading resumes once the waiting requests are handled: the next full pipelines are served too.
      for (const round of [2, 3]) {
        socket.write(pipelined(LIMITS.maxInFlight + LIMITS.maxWaiting));
        await eventually(() => (text.split('\r\n\r\n').length - 1 === 20 * round ? true : undefined), 10_000, `round ${round}`);
      }
      assert.equal(server.guard.cuts.pipeline_too_deep, 0);
      socket.destroy();
    } finally {
      await server.close();
    }
  });

  it('handles only maxInFlight requests of a connection at once, and reads no further meanwhile', async () => {
    const held: ServerResponse[] = [];
    const server = await guarded((_request, response) => held.push(response));
    try {
      const socket = connect(server.port, '127.0.0.1');
      socket.write(pipelined(10));
      await eventually(() => (held.length === LIMITS.maxInFlight ? true : undefined));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(server.handled(), LIMITS.maxInFlight, 'the others wait');
      held.shift()!.end('ok');
      await eventually(() => (server.handled() === LIMITS.maxInFlight + 1 ? true : undefined), 5_000, 'the next one');
      socket.destroy();
    } finally {
      await server.close();
    }
  });

  it('cuts a connection that pipelines deeper than maxInFlight + maxWaiting, without handling the rest', async () => {
    const server = await guarded(() => undefined); // never answers
    try {
      const socket = connect(server.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.write(pipelined(1_000));
      await closed(socket);
      assert.equal(server.handled(), LIMITS.maxInFlight);
      assert.equal(server.guard.cuts.pipeline_too_deep, 1);
    } finally {
      await server.close();
    }
  });

  it('cuts a connection whose answers are not read, and leaves an idle stream alone', async () => {
    // More than the kernel's buffers of both ends hold, so the rest waits in Node's.
    const big = 'x'.repeat(8 * 1024 * 1024);
    const server = await guarded((request, response) => {
      if (request.url === '/stream') response.write('event: hello\n\n'); // stays open, nothing unsent
      else response.end(big);
    });
    try {
      const stream = connect(server.port, '127.0.0.1');
      stream.on('data', () => undefined);
      stream.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n');
      const reader = connect(server.port, '127.0.0.1');
      reader.pause(); // never reads: megabytes of answers pile up
      reader.on('error', () => undefined);
      reader.write(pipelined(LIMITS.maxInFlight, '/big'));
      // The client, reading nothing, does not see the cut; the server counts it.
      await eventually(() => (server.guard.cuts.stalled === 1 ? true : undefined), 10_000, 'the stalled connection to be cut');
      reader.destroy();
      assert.equal(stream.destroyed, false, 'the stream with nothing unsent is still open');
      stream.destroy();
    } finally {
      await server.close();
    }
  });
});

describe('Switchyard under a flood of pipelining clients that never read and trickling bodies', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('keeps /healthz, the admin API and normal clients answering, and cuts the pipeliners', async () => {
    const sy = await startTestSwitchyard();
    cleanups.push(() => sy.close());
    const source = await sy.createSource('flood');
    const flood = startFlood({ port: sy.port, authorization: basicAuth(source.writeKey), pipeliners: 10, requestsEach: 5_000, tricklers: 10 });
    cleanups.push(() => flood.stop());

    // Bounded by count, not by time: 30 rounds of one health check, one admin call and one normal call.
    for (let round = 0; round < 30; round++) {
      const [health, admin, normal] = await Promise.all([
        fetch(`${sy.url}/healthz`),
        fetch(`${sy.url}/admin/v1/sources`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } }),
        sy.send('/v1/track', source.writeKey, { userId: 'normal', event: 'E', messageId: `normal-${round}` }),
      ]);
      assert.equal(health.status, 200, `round ${round}: /healthz`);
      assert.equal(admin.status, 200, `round ${round}: admin`);
      assert.equal(normal.status, 200, `round ${round}: normal client ${JSON.stringify(normal.body)}`);
      await Promise.all([health.arrayBuffer(), admin.arrayBuffer()]);
    }
    const cut = await eventually(async () => {
      const metrics = await (await fetch(`${sy.url}/metrics`)).text();
      const count = (reason: string): number => Number(new RegExp(`switchyard_http_connections_cut_total\\{reason="${reason}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
      const total = count('pipeline_too_deep') + count('stalled');
      return total === 10 ? total : undefined;
    }, 30_000, 'every pipeliner to be cut');
    assert.equal(cut, 10);
    const stored = await sy.store.listRecentMessages(source.id, 10_000);
    assert.equal(stored.filter((m) => m.messageId?.startsWith('normal-')).length, 30, 'every normal call stored');
  });
});
