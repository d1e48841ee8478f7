/**
 * The bare relay of `ingest.live`, run as its own process: the least a
 * collector that forwards must do. It reads the body, JSON.parses it,
 * answers 200, then POSTs it on through an undici pool to RECEIVER_URL.
 * Nothing is stored, so a crash loses what it has not yet forwarded: it is
 * the speed bound, not a design.
 *
 * Usage: PORT=<port> HOST=127.0.0.1 RECEIVER_URL=http://… node dist/bench/lib/live-relay.js
 */
import http from 'node:http';
import { Pool } from 'undici';

const receiver = new URL(process.env['RECEIVER_URL'] ?? 'http://127.0.0.1:1');
// 64 connections, like Switchyard's delivery worker's in-flight bound per origin.
const pool = new Pool(receiver.origin, { connections: 64 });

const server = http.createServer((request, response) => {
  if (request.method === 'GET') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"status":"ok"}');
    return;
  }
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    try {
      JSON.parse(body);
    } catch {
      response.writeHead(400);
      response.end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"success":true}');
    pool
      .request({ method: 'POST', path: receiver.pathname, body, headers: { 'content-type': 'application/json' } })
      .then((answer) => answer.body.dump())
      .catch(() => {});
  });
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env['PORT'] ?? 0), process.env['HOST'] ?? '127.0.0.1');

const shutdown = (): void => {
  server.close(() => void pool.close().finally(() => process.exit(0)));
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
