/**
 * The webhook receiver of `ingest.live`, run as its own process: a bare
 * `node:http` server that reads each POST, counts it and answers 200.
 * `GET /count` answers how many POSTs it has taken.
 *
 * Usage: PORT=<port> HOST=127.0.0.1 node dist/bench/lib/live-receiver.js
 */
import http from 'node:http';

let received = 0;

const server = http.createServer((request, response) => {
  if (request.method === 'GET') {
    const body = request.url === '/count' ? JSON.stringify({ received }) : '{"status":"ok"}';
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    response.end(body);
    return;
  }
  request.resume();
  request.on('end', () => {
    received++;
    response.writeHead(200, { 'content-length': '0' });
    response.end();
  });
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env['PORT'] ?? 0), process.env['HOST'] ?? '127.0.0.1');

const shutdown = (): void => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
