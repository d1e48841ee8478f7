import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type Socket, connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { BodyBudget } from '../../src/ingest/body-budget.js';
import { BODY_BUDGET } from '../../src/ingest/tracking-api.js';
import { type TestSwitchyard, basicAuth, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

describe('BodyBudget', () => {
  it('grants up to the bound per client and in all, and takes nothing when it refuses', () => {
    const budget = new BodyBudget(100, 60);
    const a = budget.open('a');
    const b = budget.open('b');
    assert.equal(a.growTo(50), true);
    assert.equal(a.growTo(61), false);
    assert.equal(a.refusedBy, 'client');
    assert.equal(a.bytes, 50);
    assert.equal(b.growTo(50), true);
    assert.equal(budget.open('c').growTo(1), false, 'the total is 100');
    assert.equal(budget.reserved, 100);
    a.release();
    a.release();
    assert.equal(budget.reserved, 50, 'released once');
    assert.equal(a.growTo(1), false, 'a released reservation does not grow');
    const c = budget.open('c');
    assert.equal(c.growTo(50), true);
    assert.equal(c.growTo(40), true, 'shrinking is a no-op');
    assert.equal(c.bytes, 50);
  });
});

/**
 * A client that opens a connection, declares a batch of `bytes` and sends
 * all but its last 10 KB, holding the rest back: the slow-body attack.
 */
function holdBody(port: number, writeKey: string, forwardedFor: string, bytes: number): Socket {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(
    `POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basicAuth(writeKey)}\r\nContent-Type: application/json\r\n` +
      `X-Forwarded-For: ${forwardedFor}\r\nContent-Length: ${bytes}\r\n\r\n` +
      `{"batch":[${' '.repeat(bytes - 10 * 1024)}`,
  );
  return socket;
}

/** Sends `body` as a chunked request, `chunkBytes` at a time, and resolves its answer's status line and body. */
async function sendChunked(port: number, writeKey: string, headers: string, body: Buffer, chunkBytes: number): Promise<{ head: string; body: string }> {
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.setEncoding('latin1').on('data', (text: string) => (answer += text));
  socket.write(`POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basicAuth(writeKey)}\r\nContent-Type: application/json\r\n${headers}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
  const parts: string[] = [];
  for (let at = 0; at < body.length; at += chunkBytes) {
    const chunk = body.subarray(at, at + chunkBytes);
    parts.push(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`);
  }
  socket.end(`${parts.join('')}0\r\n\r\n`, 'latin1');
  await once(socket, 'close');
  const [head = '', text = ''] = answer.split('\r\n\r\n');
  return { head, body: text };
}

async function bodyBytesReading(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const match = /^switchyard_ingest_body_bytes_reading (\S+)$/m.exec(text);
  return match === null ? Number.NaN : Number(match[1]);
}

/** Waits until the server reserves exactly `bytes` for bodies being read. */
async function untilReading(url: string, bytes: number): Promise<void> {
  let last = Number.NaN;
  try {
    await eventually(async () => ((last = await bodyBytesReading(url)) === bytes ? true : undefined), 10_000, `${bytes} bytes reserved for bodies`);
  } catch (error) {
    throw new Error(`${(error as Error).message} (last: ${last})`);
  }
}

describe('request bodies being read are bounded in all and per client address', () => {
  const BODY = 500_000;
  const perClient = Math.floor(BODY_BUDGET.perClientBytes / BODY);
  const total = Math.floor(BODY_BUDGET.totalBytes / BODY);
  let sy: TestSwitchyard;
  let port: number;
  let writeKey: string;
  let sourceId: string;
  const held: Socket[] = [];

  before(async () => {
    // X-Forwarded-For names the client: several client addresses from one test.
    sy = await startTestSwitchyard({ 'trust-proxy': 'true' });
    port = Number(new URL(sy.url).port);
    ({ writeKey, id: sourceId } = await sy.createSource('bodies'));
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    await sy?.close();
  });

  // 400 KB: more than what is left of a share, or of the total, once the held bodies are reserved.
  const batch = () => ({ batch: Array.from({ length: 20 }, (_, i) => ({ type: 'track', event: 'E', userId: 'u', messageId: `m-${Math.random()}-${i}`, properties: { padding: 'x'.repeat(20_000) } })) });
  const sendFrom = (address: string) => sy.send('/v1/batch', writeKey, batch(), { 'x-forwarded-for': address });

  it('one address holding its share of slow bodies is refused at once, others are not', async () => {
    for (let i = 0; i < perClient; i++) held.push(holdBody(port, writeKey, '10.0.0.1', BODY));
    await untilReading(sy.url, perClient * BODY);

    const refused = await sendFrom('10.0.0.1');
    assert.equal(refused.status, 503);
    assert.equal(refused.body.code, 'overloaded');
    assert.match(refused.body.message, /from this address/);
    assert.equal((await sendFrom('10.0.0.2')).status, 200, 'another address is served');
  });

  it('at the bound in all, every address is refused until bodies finish; then served again', async () => {
    // Other addresses fill the rest of the total, a share each.
    let address = 2;
    while (held.length < total) {
      const from = `10.0.1.${address++}`;
      for (let i = 0; i < perClient && held.length < total; i++) held.push(holdBody(port, writeKey, from, BODY));
    }
    await untilReading(sy.url, total * BODY);
    const refused = await sendFrom('10.0.2.1');
    assert.equal(refused.status, 503);
    assert.match(refused.body.message, /too many request bodies are being read at once/);

    for (const socket of held.splice(0)) socket.destroy();
    await untilReading(sy.url, 0);
    const served = await sendFrom('10.0.2.1');
    assert.equal(served.status, 200);
    // The two served requests are stored and processed; none of the held bodies is.
    const messages = await eventually(async () => {
      const stored = await sy.store.listRecentMessages(sourceId, 100);
      return stored.length >= 40 ? stored : undefined;
    }, 10_000, 'the two served batches');
    assert.equal(messages.length, 40);
    assert.ok(messages.every((message) => message.status === 'accepted'));
  });

  it('a client holds what it sent, not what it declared, compressed or not', async () => {
    const open = (encoding: string): Socket => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.write(
        `POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basicAuth(writeKey)}\r\nContent-Type: application/json\r\n` +
          `${encoding}Content-Length: 500000\r\n\r\n`,
      );
      return socket;
    };
    const plain = Array.from({ length: 10 }, () => open(''));
    const gzipped = Array.from({ length: 10 }, () => open('Content-Encoding: gzip\r\n'));
    try {
      // One byte each, then one more: 500 KB declared, 64 KB of decoder, yet each holds what it sent (twice that, at most).
      for (const socket of plain) socket.write('{');
      for (const socket of gzipped) socket.write(gzipSync('{}').subarray(0, 1));
      await untilReading(sy.url, 10 * 1 + 10 * 2);
      for (const socket of plain) socket.write('"');
      await untilReading(sy.url, 10 * 2 + 10 * 2);
    } finally {
      for (const socket of [...plain, ...gzipped]) socket.destroy();
    }
    await untilReading(sy.url, 0);
  });

  it('a body sent in many chunks arrives whole, one-byte chunks too', async () => {
    const cases = [
      { chunkBytes: 777, body: JSON.stringify(batch()) },
      // A character split across chunks must come out whole.
      { chunkBytes: 1, body: JSON.stringify({ batch: [{ type: 'track', event: 'Tiny', userId: 'u', properties: { text: 'é✓' } }] }) },
    ];
    for (const { chunkBytes, body } of cases) {
      const before = (await sy.store.listRecentMessages(sourceId, 1000)).length;
      const answer = await sendChunked(port, writeKey, '', Buffer.from(body, 'utf8'), chunkBytes);
      assert.match(answer.head, /^HTTP\/1\.1 200 /, answer.body);
      const count = JSON.parse(body).batch.length as number;
      await eventually(async () => ((await sy.store.listRecentMessages(sourceId, 1000)).length === before + count ? true : undefined), 10_000, 'the chunked batch');
    }
    const [tiny] = await sy.store.listRecentMessages(sourceId, 1);
    assert.equal(JSON.parse(tiny!.body).properties.text, 'é✓');
  });

  it('a client gone in the middle of a compressed body leaves the server up and nothing reserved', async () => {
    const gzipped = gzipSync(JSON.stringify(batch()));
    for (let i = 0; i < 5; i++) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.write(
        `POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basicAuth(writeKey)}\r\nContent-Type: application/json\r\n` +
          `Content-Encoding: gzip\r\nContent-Length: ${gzipped.length}\r\n\r\n`,
      );
      socket.write(gzipped.subarray(0, gzipped.length >> 1));
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (i % 2 === 0) socket.end();
      else socket.resetAndDestroy();
    }
    await untilReading(sy.url, 0);
    assert.equal((await fetch(`${sy.url}/healthz`)).status, 200);
    assert.equal((await sendFrom('10.0.4.1')).status, 200);
  });
});
