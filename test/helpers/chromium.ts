import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, chromium } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * Why browser tests cannot run here, or undefined when they can. Without
 * Chromium they are skipped, loudly; with REQUIRE_CHROMIUM=1 (CI) a missing
 * Chromium fails them instead.
 */
export function chromiumMissing(): string | undefined {
  if (existsSync(CHROMIUM_PATH)) return undefined;
  const reason = `${CHROMIUM_PATH} is missing: browser-library tests NOT RUN (apt-get install chromium)`;
  if (process.env['REQUIRE_CHROMIUM'] === '1') throw new Error(`REQUIRE_CHROMIUM=1 but ${reason}`);
  process.stderr.write(`\n*** SKIPPED: ${reason} ***\n\n`);
  return reason;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** A static site on its own loopback origin. */
export interface TestSite {
  readonly url: string;
  readonly origin: string;
  close(): Promise<void>;
}

/** Serves `files` (path → content type and body) on a free loopback port. */
export async function startSite(files: ReadonlyMap<string, { type: string; body: string | Buffer }>): Promise<TestSite> {
  const sockets = new Set<Socket>();
  const server = http.createServer((request, response) => {
    const file = files.get((request.url ?? '/').split('?')[0]!);
    if (file === undefined) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-store' }).end(file.body);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // Another port of loopback: another origin, so every call to Switchyard is cross-origin (CORS), as from a real site.
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    origin: `http://127.0.0.1:${port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * A TLS-terminating reverse proxy on loopback, as Switchyard runs behind in
 * production: forwards every request to `target` with X-Forwarded-Proto and
 * X-Forwarded-Host, under a self-signed certificate made for the run.
 */
export interface TlsProxy {
  readonly url: string;
  close(): Promise<void>;
}

export async function startTlsProxy(targetPort: number): Promise<TlsProxy> {
  const certDir = await mkdtemp(path.join(tmpdir(), 'switchyard-proxy-cert-'));
  const keyPath = path.join(certDir, 'key.pem');
  const certPath = path.join(certDir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-days', '1', '-keyout', keyPath, '-out', certPath], { stdio: 'ignore' });
  const [key, cert] = await Promise.all([readFile(keyPath, 'utf8'), readFile(certPath, 'utf8')]);
  await rm(certDir, { recursive: true, force: true });

  const sockets = new Set<Socket>();
  const server = https.createServer({ key, cert }, (request: IncomingMessage, response: ServerResponse) => {
    const upstream = http.request(
      {
        host: '127.0.0.1',
        port: targetPort,
        method: request.method,
        path: request.url,
        headers: { ...request.headers, 'x-forwarded-proto': 'https', 'x-forwarded-host': request.headers.host ?? '', 'x-forwarded-for': request.socket.remoteAddress ?? '' },
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    upstream.on('error', () => response.destroy());
    request.pipe(upstream);
  });
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
