import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { type AddressInfo, type Socket, connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { ConfigError, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, loadConfig } from '../../src/config.js';
import { type AdmissionLimits, ConnectionAdmission } from '../../src/http/connection-admission.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * A raw client connection. Opened, it sends nothing until asked to: an
 * admitted one is held until the 30 s request timeout (not the 5 s
 * keep-alive timeout that follows an answer), far longer than a test
 * holds it. A refused one has the server's 503 waiting in it.
 */
class Connection {
  private text = '';
  private ended = false;
  private readonly changed = new Set<() => void>();

  private constructor(readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.text += chunk;
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('close', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static async open(port: number, localAddress = '127.0.0.1'): Promise<Connection> {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    const connection = new Connection(socket);
    await once(socket, 'connect');
    return connection;
  }

  /** Sends a GET and resolves the first answer of the connection: the server's refusal if it refused it, whenever that came. */
  async get(path: string, close = true): Promise<Answer> {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${close ? 'Connection: close\r\n' : ''}\r\n`);
    return this.answer();
  }

  /** Whether the server ended the connection (it sends nothing more). */
  get over(): boolean {
    return this.ended;
  }

  /** Resolves once the server ended the connection. */
  async closedByServer(): Promise<void> {
    while (!this.ended) await this.next();
  }

  close(): void {
    this.socket.destroy();
  }

  private async answer(): Promise<Answer> {
    for (;;) {
      const head = this.text.indexOf('\r\n\r\n');
      if (head >= 0) {
        const [statusLine = '', ...lines] = this.text.slice(0, head).split('\r\n');
        const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
        const length = Number(headers['content-length']);
        assert.ok(Number.isInteger(length), `a Content-Length in ${statusLine}`);
        if (this.text.length >= head + 4 + length) {
          const body = this.text.slice(head + 4, head + 4 + length);
          this.text = this.text.slice(head + 4 + length);
          return { status: Number(statusLine.split(' ')[1]), headers, body: Buffer.from(body, 'latin1').toString('utf8') };
        }
      }
      if (this.ended) throw new Error(`the connection ended before a whole answer: ${JSON.stringify(this.text.slice(0, 200))}`);
      await this.next();
    }
  }

  /** Resolves when something arrives; fails after 10 s of nothing, so that a missing answer fails the test instead of hanging it. */
  private next(): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`nothing came for 10 s; so far: ${JSON.stringify(this.text.slice(0, 200))}`)), 10_000);
      this.changed.add(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private wake(): void {
    for (const resolve of this.changed) resolve();
    this.changed.clear();
  }
}

async function openMany(port: number, count: number, localAddress?: string): Promise<Connection[]> {
  const connections: Connection[] = [];
  // One after another: the server accepts them in this order.
  for (let i = 0; i < count; i++) connections.push(await Connection.open(port, localAddress));
  return connections;
}

interface Scrape {
  readonly open: number;
  readonly refused: { readonly total: number; readonly per_address: number };
}

function readMetrics(text: string): Scrape {
  const value = (pattern: RegExp): number => Number(pattern.exec(text)?.[1] ?? 0);
  const open = /^switchyard_http_connections_open (\d+)$/m.exec(text);
  assert.ok(open, 'switchyard_http_connections_open in /metrics');
  return {
    open: Number(open[1]),
    refused: {
      total: value(/^switchyard_http_connections_refused_total\{reason="total"\} (\d+)$/m),
      per_address: value(/^switchyard_http_connections_refused_total\{reason="per_address"\} (\d+)$/m),
    },
  };
}

/** /metrics on an open connection. */
async function scrape(connection: Connection): Promise<Scrape> {
  const answer = await connection.get('/metrics');
  assert.equal(answer.status, 200, answer.body);
  return readMetrics(answer.body);
}

/** /metrics on a new connection, undefined while it is refused. */
async function scrapeFresh(port: number): Promise<Scrape | undefined> {
  const connection = await Connection.open(port);
  try {
    const answer = await connection.get('/metrics');
    return answer.status === 200 ? readMetrics(answer.body) : undefined;
  } finally {
    connection.close();
  }
}

/** Waits until the server holds no connection but the scrape's own: none of those counted before is left (no leak). */
async function untilOnlyTheScrape(port: number): Promise<Scrape> {
  let last: Scrape | undefined;
  try {
    return await eventually(async () => ((last = await scrapeFresh(port))?.open === 1 ? last : undefined), 10_000, 'the open connections to be counted down');
  } catch (error) {
    throw new Error(`${(error as Error).message} (last: ${JSON.stringify(last)})`);
  }
}

function assertRefusal(answer: Answer, reason: 'total' | 'per_address'): void {
  assert.equal(answer.status, 503);
  assert.equal(answer.headers['retry-after'], '5');
  assert.equal(answer.headers['connection'], 'close');
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  const body = JSON.parse(answer.body) as { success: boolean; code: string; message: string; error: { code: string; message: string } };
  // Both APIs' error shapes: the request was not read, so which API it was for is unknown.
  assert.equal(body.success, false);
  assert.equal(body.code, 'overloaded');
  assert.equal(body.error.code, 'overloaded');
  assert.equal(body.error.message, body.message);
  assert.match(body.message, reason === 'total' ? /the server holds as many connections/ : /this address holds as many connections/);
}

describe('connection caps of a Switchyard', () => {
  const servers: TestSwitchyard[] = [];
  const connections: Connection[] = [];
  after(async () => {
    for (const connection of connections) connection.close();
    for (const server of servers) await server.close();
  });
  const start = async (flags: Record<string, string>): Promise<number> => {
    const sy = await startTestSwitchyard(flags);
    servers.push(sy);
    return sy.port;
  };
  const hold = async (port: number, count: number, localAddress?: string): Promise<Connection[]> => {
    const opened = await openMany(port, count, localAddress);
    connections.push(...opened);
    return opened;
  };

  it('refuses the connection past the total with a 503 (per address off with 0), keeps those open working, and frees slots on close', async () => {
    const port = await start({ 'max-connections': '3', 'max-connections-per-address': '0' });
    // Three connections from one address are held: 0 is no cap per address, not a cap of 0.
    const held = await hold(port, 3);
    const [extra] = await hold(port, 1);
    assertRefusal(await extra!.get('/healthz'), 'total');
    await extra!.closedByServer();

    // A held connection answers, and counts itself and the others.
    assert.deepEqual(await scrape(held[0]!), { open: 3, refused: { total: 1, per_address: 0 } });
    const health = await held[1]!.get('/healthz');
    assert.equal(health.status, 200);
    assert.equal(health.body, '{"status":"ok"}');

    for (const connection of [...held, extra!]) connection.close();
    await untilOnlyTheScrape(port);

    // Freed slots are taken again, and the cap is where it was. The last
    // scrape's connection (or a previous round's) may still be counted when
    // the next ones come: then one of the three is refused too, and the
    // round is made again.
    await eventually(async () => {
      const round = await hold(port, 4);
      const answers = await Promise.all(round.map((connection) => connection.get('/healthz')));
      for (const connection of round) connection.close();
      if (answers.slice(0, 3).some((answer) => answer.status === 503)) return undefined;
      assert.deepEqual(answers.map((answer) => answer.status), [200, 200, 200, 503]);
      assertRefusal(answers[3]!, 'total');
      return true;
    }, 10_000, 'a round of three held connections and one refused');
    await untilOnlyTheScrape(port);
  });

  it('refuses the connection past the cap of its address, not those of other addresses', async () => {
    const port = await start({ 'max-connections-per-address': '2' });
    const fromOne = await hold(port, 3, '127.0.0.1');
    assertRefusal(await fromOne[2]!.get('/healthz'), 'per_address');
    await fromOne[2]!.closedByServer();

    const [fromTwo] = await hold(port, 1, '127.0.0.2');
    assert.equal((await fromTwo!.get('/healthz')).status, 200, 'another address is served');
    const counted = await scrape(fromOne[0]!);
    assert.deepEqual(counted.refused, { total: 0, per_address: 1 });

    // fromOne[0] was closed by its Connection: close; with fromOne[1] closed too, the address has room again.
    fromOne[1]!.close();
    const again = await eventually(async () => {
      const [connection] = await hold(port, 1, '127.0.0.1');
      const answer = await connection!.get('/healthz');
      return answer.status === 200 ? answer : undefined;
    }, 10_000, 'a connection from the first address to be served again');
    assert.equal(again.body, '{"status":"ok"}');
    for (const connection of connections) connection.close();
    await untilOnlyTheScrape(port);
  });

  it('has no cap per address behind a trusted proxy unless one is set, and still the total', async () => {
    // Every connection comes from the proxy: one more than the cap per address would otherwise allow, all from 127.0.0.1.
    const port = await start({ 'trust-proxy': 'true', 'max-connections': String(DEFAULT_MAX_CONNECTIONS_PER_ADDRESS + 1) });
    const held = await hold(port, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS + 1);
    const [extra] = await hold(port, 1);
    assertRefusal(await extra!.get('/healthz'), 'total');
    assert.equal((await held.at(-1)!.get('/healthz')).status, 200, 'the last held connection is served');
    assert.deepEqual((await scrape(held[0]!)).refused, { total: 1, per_address: 0 });
    for (const connection of connections.splice(0)) connection.close();
    await untilOnlyTheScrape(port);
  });
});

describe('ConnectionAdmission on a plain server', () => {
  /** A node:http server under the admission alone; `requests` counts what its handler was given. */
  async function admitted(limits: AdmissionLimits): Promise<{ port: number; admission: ConnectionAdmission; requests: () => number; refused: Socket[]; close(): Promise<void> }> {
    const admission = new ConnectionAdmission(limits);
    let requests = 0;
    const server = createServer((_request, response) => {
      requests++;
      response.end('ok');
    });
    admission.attach(server);
    // Added after the admission, this listener sees every connection, refused ones too (as its TSDoc says).
    const refused: Socket[] = [];
    server.on('connection', (socket: Socket) => {
      if (socket.listenerCount('data') === 0) refused.push(socket);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return {
      port: (server.address() as AddressInfo).port,
      admission,
      requests: () => requests,
      refused,
      async close() {
        admission.stop();
        server.closeAllConnections();
        server.close();
        await once(server, 'close');
      },
    };
  }

  it('reads nothing of a refused connection, and closes it after the linger though the client reads nothing', async () => {
    const server = await admitted({ caps: { total: 1, perAddress: 0 }, maxAnswering: 10, lingerMs: 200, retryAfterS: 5 });
    try {
      const held = await Connection.open(server.port);
      const silent = await Connection.open(server.port);
      silent.socket.pause(); // takes nothing of the answer
      // A request and more: none of it is parsed or read.
      silent.socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n${'x'.repeat(65_536)}`);
      const [socket] = await eventually(() => (server.refused.length === 1 ? server.refused : undefined));
      // Counted down on its 'close', which follows its destruction.
      await eventually(() => (server.admission.refusing === 0 ? true : undefined), 10_000, 'the refused connection to be closed');
      assert.equal(socket!.destroyed, true);
      assert.equal(socket!.bytesRead, 0, 'nothing read from the refused connection');
      assert.equal(server.requests(), 0, 'no request of it handled');
      assert.equal(server.admission.refusals.total, 1);
      assert.equal((await held.get('/')).status, 200, 'the held connection is served');
      silent.close();
    } finally {
      await server.close();
    }
  });

  it('answers at most maxAnswering refusals at once: past them one is closed unanswered, and past the total too, Node drops it', async () => {
    const server = await admitted({ caps: { total: 2, perAddress: 1 }, maxAnswering: 2, lingerMs: 600_000, retryAfterS: 5 });
    try {
      // One held per address, two refused being answered (their linger outlasts the test).
      await Connection.open(server.port, '127.0.0.1');
      const answering = await openMany(server.port, 2, '127.0.0.1');
      for (const connection of answering) assertRefusal(await connection.get('/'), 'per_address');
      assert.equal(server.admission.refusing, 2);
      const unanswered = await Connection.open(server.port, '127.0.0.1');
      await unanswered.closedByServer();
      assert.equal(server.admission.refusals.per_address, 3);
      // The total held (2) and two answers in the making: Node closes the next connection as it accepts it.
      await Connection.open(server.port, '127.0.0.2');
      const dropped = await Connection.open(server.port, '127.0.0.3');
      await dropped.closedByServer();
      assert.equal(server.admission.refusals.total, 1);
      assert.equal(server.admission.open, 2);
      assert.equal(server.requests(), 0);
      server.admission.stop(); // the server closes: refusals being answered are closed at once
      await eventually(() => (server.admission.refusing === 0 ? true : undefined));
    } finally {
      await server.close();
    }
  });
});

describe('connection cap settings', () => {
  it('default to 10,000 and 1,000 per address, 0 per address behind a trusted proxy unless set', () => {
    const plain = loadConfig({}, {});
    assert.equal(plain.maxConnections, DEFAULT_MAX_CONNECTIONS);
    assert.equal(DEFAULT_MAX_CONNECTIONS, 10_000);
    assert.equal(plain.maxConnectionsPerAddress, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS);
    assert.equal(DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, 1_000);
    assert.equal(loadConfig({}, { SWITCHYARD_TRUST_PROXY: 'true' }).maxConnectionsPerAddress, 0);
    assert.equal(loadConfig({ 'trust-proxy': true, 'max-connections-per-address': '50' }, {}).maxConnectionsPerAddress, 50);
    const set = loadConfig({ 'max-connections': '20' }, { SWITCHYARD_MAX_CONNECTIONS: '30', SWITCHYARD_MAX_CONNECTIONS_PER_ADDRESS: '0' });
    assert.equal(set.maxConnections, 20, 'the flag wins');
    assert.equal(set.maxConnectionsPerAddress, 0);
  });

  it('refuses values out of range, naming the setting', () => {
    for (const [env, value] of [['SWITCHYARD_MAX_CONNECTIONS', '0'], ['SWITCHYARD_MAX_CONNECTIONS', '1.5'], ['SWITCHYARD_MAX_CONNECTIONS_PER_ADDRESS', '-1'], ['SWITCHYARD_MAX_CONNECTIONS_PER_ADDRESS', 'lots']] as const) {
      assert.throws(() => loadConfig({}, { [env]: value }), (error: unknown) => error instanceof ConfigError && error.message.includes(env), `${env}=${value}`);
    }
  });
});
