import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from './switchyard.js';

export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** How to answer one request. `hang`: answer only when the test calls `release()`. */
export interface Reply {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly delayMs?: number;
  readonly hang?: boolean;
}

export interface TestReceiver {
  /** `http(s)://127.0.0.1:PORT/hook` */
  readonly url: string;
  readonly port: number;
  /** Every request received, in order of arrival (recorded once its body is read). */
  readonly requests: ReceivedRequest[];
  /** Decides each answer; replace it at any time. `index` counts requests from 0. */
  reply: (request: ReceivedRequest, index: number) => Reply;
  /** Requests waiting for `release()`. */
  hanging(): number;
  /** Answers every hung request (and makes later hangs answer at once) with `status`. */
  release(status?: number): void;
  /** Resolves the requests once there are at least `count`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/**
 * A real HTTP (or, with `tls`, HTTPS) receiver on a free loopback port that
 * records what it gets and answers as the test says (200 by default).
 */
export async function startReceiver(options: { tls?: { key: string; cert: string } } = {}): Promise<TestReceiver> {
  const receiver = new Receiver(options.tls);
  await receiver.listen();
  return receiver;
}

class Receiver implements TestReceiver {
  readonly requests: ReceivedRequest[] = [];
  reply: (request: ReceivedRequest, index: number) => Reply = () => ({ status: 200 });
  port = 0;
  private readonly server: http.Server;
  private readonly hung: Array<(status: number) => void> = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sockets = new Set<Socket>();
  private released: number | undefined;

  constructor(private readonly tls: { key: string; cert: string } | undefined) {
    const handler = (request: IncomingMessage, response: ServerResponse): void => this.handle(request, response);
    this.server = tls === undefined ? http.createServer(handler) : https.createServer(tls, handler);
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  get url(): string {
    return `${this.tls === undefined ? 'http' : 'https'}://127.0.0.1:${this.port}/hook`;
  }

  async listen(): Promise<void> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as AddressInfo).port;
  }

  hanging(): number {
    return this.hung.length;
  }

  release(status = 200): void {
    this.released = status;
    for (const respond of this.hung.splice(0)) respond(status);
  }

  waitFor(count: number, timeoutMs = 10_000): Promise<ReceivedRequest[]> {
    return eventually(() => (this.requests.length >= count ? this.requests : undefined), timeoutMs, `${count} requests at ${this.url}`);
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
    await once(this.server, 'close');
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const received: ReceivedRequest = {
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      const reply = this.reply(received, this.requests.length);
      this.requests.push(received);
      if (reply.hang === true && this.released === undefined) {
        this.hung.push((status) => answer(response, reply, status));
      } else if (reply.delayMs !== undefined) {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          answer(response, reply);
        }, reply.delayMs);
        this.timers.add(timer);
      } else {
        answer(response, reply, reply.hang === true ? this.released : undefined);
      }
    });
  }
}

function answer(response: ServerResponse, reply: Reply, status = reply.status ?? 200): void {
  if (response.destroyed) return;
  response.writeHead(status, { 'content-type': 'text/plain', ...reply.headers });
  response.end(reply.body ?? 'ok');
}

/**
 * An HTTPS receiver whose certificate nobody signed: made at test time with
 * `openssl` (self-signed, CN=localhost, a day long). `close` also removes the
 * certificate's files.
 */
export async function startSelfSignedReceiver(): Promise<TestReceiver> {
  const certDir = await mkdtemp(path.join(tmpdir(), 'switchyard-cert-'));
  try {
    const key = path.join(certDir, 'key.pem');
    const cert = path.join(certDir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-days', '1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    const receiver = await startReceiver({ tls: { key: await readFile(key, 'utf8'), cert: await readFile(cert, 'utf8') } });
    const close = receiver.close.bind(receiver);
    receiver.close = async () => {
      await close();
      await rm(certDir, { recursive: true, force: true });
    };
    return receiver;
  } catch (error) {
    await rm(certDir, { recursive: true, force: true });
    throw error;
  }
}
