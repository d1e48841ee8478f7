/**
 * The durable baseline of the ingest benches, run as its own process: the
 * least a Node.js collector must do for a 200 that means "stored" (issue
 * 28): read the body, JSON.parse it, append it to a file, and answer only
 * once an fdatasync covering it has returned. Syncs are group commits:
 * every body that arrives while one sync runs is written and synced by the
 * next, as Switchyard's own group commit does. Nothing else: no framework,
 * no rows, no index, no later stage.
 *
 * Usage: PORT=<port> HOST=127.0.0.1 DATA_DIR=<dir> node dist/bench/lib/durable-baseline-server.js
 */
import { open } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';

const SUCCESS = '{"success":true}';
const INVALID = '{"success":false,"code":"invalid_json"}';
const NEWLINE = Buffer.from('\n');

function answer(response: http.ServerResponse, status: number, body: string): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

const dataDir = process.env['DATA_DIR'];
if (dataDir === undefined) throw new Error('DATA_DIR must name a folder for the append-only file');
const file = await open(path.join(dataDir, 'bodies.log'), 'a');

/** Bodies parsed and waiting for the next group commit, with who to answer after it. */
let waiting: Array<{ body: Buffer; response: http.ServerResponse }> = [];
let syncing = false;

async function commit(): Promise<void> {
  if (syncing || waiting.length === 0) return;
  syncing = true;
  const group = waiting;
  waiting = [];
  try {
    await file.write(Buffer.concat(group.flatMap(({ body }) => [body, NEWLINE])));
    await file.datasync();
    for (const { response } of group) answer(response, 200, SUCCESS);
  } catch (error) {
    for (const { response } of group) answer(response, 500, JSON.stringify({ success: false, error: String(error) }));
  } finally {
    syncing = false;
  }
  void commit();
}

const server = http.createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/healthz') return answer(response, 200, '{"status":"ok"}');
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks);
    try {
      JSON.parse(body.toString('utf8'));
    } catch {
      return answer(response, 400, INVALID);
    }
    waiting.push({ body, response });
    void commit();
  });
});

// Same keep-alive window as the other baselines.
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env['PORT'] ?? 0), process.env['HOST'] ?? '127.0.0.1');

const shutdown = (): void => {
  server.close(() => void file.close().then(() => process.exit(0)));
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
