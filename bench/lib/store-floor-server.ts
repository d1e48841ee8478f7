/**
 * The store floor of the ingest benches, run as its own process: the bare
 * baseline (baseline-server.ts) plus the least a collector that keeps every
 * message must add before its 200: each message as one row of an embedded
 * SQLite database (WAL, `synchronous = NORMAL`, as Switchyard's default
 * durability), keyed by its messageId for de-duplication, committed in
 * groups (every request of one event-loop turn in one transaction) and
 * answered after the commit. No framework, no validation, no
 * normalization, no routing, no delivery jobs, no profiles: nothing
 * Switchyard does after the row is written. Its ratio to the bare baseline
 * bounds what any such collector can reach on the machine.
 *
 * Usage: PORT=<port> HOST=127.0.0.1 DATA_DIR=<dir> node dist/bench/lib/store-floor-server.js
 */
import http from 'node:http';
import path from 'node:path';
import Database from 'better-sqlite3';

const SUCCESS = '{"success":true}';
const INVALID = '{"success":false,"code":"invalid_json"}';

const dataDir = process.env['DATA_DIR'];
if (dataDir === undefined) throw new Error('DATA_DIR is required');
const db = new Database(path.join(dataDir, 'floor.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec('CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, body TEXT NOT NULL)');
const insert = db.prepare('INSERT OR IGNORE INTO messages (message_id, body) VALUES (?, ?)');

interface Row {
  readonly messageId: string;
  readonly body: string;
}

let rows: Row[] = [];
let waiting: http.ServerResponse[] = [];
let flushScheduled = false;

const commit = db.transaction((batch: readonly Row[]) => {
  for (const row of batch) insert.run(row.messageId, row.body);
});

function flush(): void {
  flushScheduled = false;
  const batch = rows;
  const responses = waiting;
  rows = [];
  waiting = [];
  commit(batch);
  for (const response of responses) answer(response, 200, SUCCESS);
}

function answer(response: http.ServerResponse, status: number, body: string): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

/** The messages of a parsed body, each with the text stored for it: a batch's elements, or the call itself as received. */
function messagesOf(value: unknown, text: string): Row[] | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const batch = (value as { batch?: unknown }).batch;
  if (Array.isArray(batch)) {
    return batch.map((element: { messageId?: unknown }) => ({ messageId: String(element.messageId), body: JSON.stringify(element) }));
  }
  return [{ messageId: String((value as { messageId?: unknown }).messageId), body: text }];
}

const server = http.createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/healthz') return answer(response, 200, '{"status":"ok"}');
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    let messages: Row[] | undefined;
    try {
      messages = messagesOf(JSON.parse(text), text);
    } catch {
      messages = undefined;
    }
    if (messages === undefined) return answer(response, 400, INVALID);
    for (const message of messages) rows.push(message);
    waiting.push(response);
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
  });
});

// Same keep-alive window as Fastify's default, so neither side drops idle load connections sooner.
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env['PORT'] ?? 0), process.env['HOST'] ?? '127.0.0.1');

const shutdown = (): void => {
  server.close(() => {
    db.close();
    process.exit(0);
  });
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
