import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { type TestSwitchyard, basicAuth, startTestSwitchyard } from '../helpers/switchyard.js';
import { seededRandom as random } from '../helpers/seeded-random.js';

const SEED = Number(process.env['FUZZ_SEED'] ?? 20261122);
const CASES = Number(process.env['FUZZ_CASES'] ?? 3000);
const ROUTES = ['/v1/track', '/v1/identify', '/v1/page', '/v1/screen', '/v1/group', '/v1/alias', '/v1/batch', '/v1/t', '/v1/b', '/v1/import'];
const FIELDS = ['userId', 'anonymousId', 'event', 'type', 'messageId', 'timestamp', 'sentAt', 'context', 'integrations', 'properties', 'traits', 'groupId', 'previousId', 'name', 'batch', 'writeKey', '__proto__', 'constructor'];

function fuzzCase(next: () => number, writeKey: string): { route: string; body: Buffer; headers: Record<string, string> } {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const value = (depth: number): unknown => {
    switch (Math.floor(next() * (depth > 3 ? 6 : 9))) {
      case 0: return null;
      case 1: return next() < 0.5;
      case 2: return Math.floor((next() - 0.5) * 1e12) / (next() < 0.5 ? 1 : 7);
      case 3: return pick(['', 'x', '2026-01-01T00:00:00Z', 'not a date', '\u0000', '\ud800', '𝄞', 'a'.repeat(2000)]);
      case 4: return pick([Number.MAX_SAFE_INTEGER, -0, 1e308]);
      case 5: return 'ok';
      case 6: return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
      default: {
        const object: Record<string, unknown> = {};
        for (let i = Math.floor(next() * 5); i > 0; i--) object[pick(FIELDS)] = value(depth + 1);
        return object;
      }
    }
  };
  const route = pick(ROUTES);
  const message: Record<string, unknown> = {};
  for (let i = Math.floor(next() * 8); i > 0; i--) message[pick(FIELDS)] = value(0);
  if (route.includes('b') && next() < 0.7) message['batch'] = Array.from({ length: Math.floor(next() * 6) }, () => value(1));
  let text = JSON.stringify(message);
  const headers: Record<string, string> = { authorization: basicAuth(writeKey) };
  switch (Math.floor(next() * 10)) {
    case 0: text = text.slice(0, Math.floor(next() * text.length)); break; // truncated
    case 1: text = `${'['.repeat(5000)}${']'.repeat(5000)}`; break; // deep array, not an object
    case 2: text = `{"userId":"u","event":"E","properties":${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}}`; break;
    case 3: {
      const bytes = Buffer.from(text);
      bytes[Math.floor(next() * bytes.length)] = 0xff; // invalid UTF-8
      return { route, body: bytes, headers: { ...headers, 'content-type': pick(['text/plain', 'application/json', 'application/x-www-form-urlencoded']) } };
    }
    case 4: return { route, body: gzipSync(text), headers: { ...headers, 'content-encoding': 'gzip' } };
    case 5: return { route, body: gzipSync(text).subarray(0, 10), headers: { ...headers, 'content-encoding': 'gzip' } };
    default: break;
  }
  return { route, body: Buffer.from(text), headers };
}

describe('bad input never crashes the server nor gets a 5xx', () => {
  let sy: TestSwitchyard;
  let writeKey: string;

  before(async () => {
    sy = await startTestSwitchyard();
    writeKey = (await sy.createSource('fuzz')).writeKey;
  });
  after(async () => {
    await sy.close();
  });

  it(`answers ${CASES} seeded random requests (seed ${SEED}) with 200 or a clear 4xx`, async () => {
    const next = random(SEED);
    const cases = Array.from({ length: CASES }, () => fuzzCase(next, writeKey));
    const statuses = new Map<number, number>();
    let index = 0;
    const worker = async () => {
      while (index < cases.length) {
        const i = index++;
        const { route, body, headers } = cases[i]!;
        const response = await fetch(sy.url + route, { method: 'POST', headers, body });
        const json = (await response.json()) as { success?: boolean; code?: string };
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        assert.ok([200, 400].includes(response.status), `case ${i} (${route}): ${response.status} ${JSON.stringify(json)}`);
        if (response.status === 400) assert.equal(typeof json.code, 'string', `case ${i} has a code`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.ok((statuses.get(200) ?? 0) > CASES / 4, `enough valid requests: ${JSON.stringify([...statuses])}`);
    assert.ok((statuses.get(400) ?? 0) > CASES / 20, `enough invalid requests: ${JSON.stringify([...statuses])}`);
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
    assert.equal((await fetch(`${sy.url}/healthz`)).status, 200);

    // Every stored message can be read back as JSON (once processed: a 200 means stored raw).
    await sy.processed();
    for (const message of await sy.store.listRecentMessages((await sy.admin('GET', '/sources')).body.sources.find((s: any) => s.name === 'fuzz').id, 5000)) {
      JSON.parse(message.body);
    }
  });

  it('answers a body that never ends once it passes the limit, then cuts the connection', async () => {
    const socket = connect(sy.port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {}); // the server may reset while we are still writing

    socket.write(`POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicAuth(writeKey)}\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const chunk = Buffer.alloc(16 * 1024, 'a');
    // Bounded: at most 4 MB, far past the 500 KB limit.
    for (let sent = 0; sent < 256 && !socket.destroyed && answer === ''; sent++) {
      socket.write(`${chunk.length.toString(16)}\r\n`);
      socket.write(chunk);
      socket.write('\r\n');
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.match(answer, /^HTTP\/1\.1 400/);
    // The client keeps sending; the server drops it for a while, then cuts the connection.
    const stopWriting = setInterval(() => socket.writable && socket.write(`${chunk.length.toString(16)}\r\n${'a'.repeat(chunk.length)}\r\n`), 20);
    const cut = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 15_000))]);
    clearInterval(stopWriting);
    socket.destroy();
    assert.equal(cut, true, 'the server closes the connection of an endless body');
    assert.match(answer, /"code":"body_too_large"/);
    assert.equal((await fetch(`${sy.url}/healthz`)).status, 200);
  });
});
