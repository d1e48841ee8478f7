/**
 * The bare baseline of the ingest benches, run as its own process: the
 * least a Node.js collector must do (read the body, JSON.parse it, answer
 * 200) with nothing stored. Switchyard's figures are divided by this
 * server's, measured in the same run on the same CPUs.
 *
 * Usage: PORT=<port> HOST=127.0.0.1 node dist/bench/lib/baseline-server.js
 */
import http from 'node:http';

const SUCCESS = '{"success":true}';
const INVALID = '{"success":false,"code":"invalid_json"}';

function answer(response: http.ServerResponse, status: number, body: string): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

const server = http.createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/healthz') return answer(response, 200, '{"status":"ok"}');
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    try {
      // Parsed and dropped: the point is to pay for parsing exactly as Switchyard must.
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return answer(response, 400, INVALID);
    }
    answer(response, 200, SUCCESS);
  });
});

// Same keep-alive window as Fastify's default, so neither side drops idle load connections sooner.
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env['PORT'] ?? 0), process.env['HOST'] ?? '127.0.0.1');

const shutdown = (): void => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
