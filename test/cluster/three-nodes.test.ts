import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, it } from 'node:test';
import pg from 'pg';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

const SENDERS = 8;
const REQUESTS_PER_SENDER = 150;
const MESSAGES_PER_REQUEST = 5;
/** The default; the worker's lease is this + 30 s, so the dead node's jobs come back after 35 s. */
const DELIVERY_TIMEOUT_MS = 5_000;
const RECEIVER_DELAY_MS = 100;
/** How long the count of what is left may stay unchanged before the wait fails: past the longest retry delay or hold seen under load. */
const STALL_MS = 90_000;
/** The longest wait for the receiver to get everything, however steady the progress. */
const MAX_DRAIN_MS = 360_000;

/**
 * Three `serve` processes on one database, one killed with SIGKILL under
 * load. Every message answered 200 by any node must reach the receiver at
 * least once: the dead node's queued jobs are claimed by the others at once,
 * and the jobs it had leased once their leases run out.
 *
 * Duplicate bound (the lease rules): a node claims only a job nobody holds
 * or whose lease expired, and an outcome recorded under a lost lease is
 * ignored. So a message reaches the receiver twice only if (a) the dead node
 * held its job when it died (it may have POSTed it without recording that),
 * or (b) an attempt was recorded as failed although the receiver got it (an
 * answer after the timeout on this busy machine). No round here outlasts its
 * 35 s lease, so nothing else may cause one. The test reads (a) from the
 * database right after the kill and (b) at the end, and checks that every
 * duplicate is one of them.
 */
await describePostgres('three nodes on one PostgreSQL database', () => {
  let db: FreshDatabase;
  const nodes: ChildSwitchyard[] = [];
  const received = new Map<string, number>();
  const receiver = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const { messageId } = JSON.parse(Buffer.concat(chunks).toString()) as { messageId: string };
      received.set(messageId, (received.get(messageId) ?? 0) + 1);
      // A little slow, so that a node always has POSTs in flight when it is killed.
      setTimeout(() => response.writeHead(200).end('ok'), RECEIVER_DELAY_MS);
    });
  });

  before(async () => {
    db = await freshDatabase();
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
  });
  after(async () => {
    await Promise.all(nodes.map((node) => node.kill('SIGKILL')));
    receiver.close();
    await db?.drop();
  });

  it('delivers every acknowledged message at least once when one node is killed', { timeout: 600_000 }, async (t) => {
    const env = {
      DATABASE_URL: db.url,
      SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
      SWITCHYARD_DELIVERY_TIMEOUT_MS: String(DELIVERY_TIMEOUT_MS),
    };
    const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    // The first node migrates and holds the source; the others start once it
    // is configured, so every node routes to the webhooks from its first message.
    nodes.push(await startChildSwitchyard(env));
    const admin = async (method: string, route: string, body: unknown): Promise<any> => {
      const response = await fetch(`${nodes[0]!.url}/admin/v1${route}`, {
        method,
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json = await response.json();
      assert.ok(response.ok, `${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
      return json;
    };
    const { id: sourceId, writeKey } = await admin('POST', '/sources', { name: 'cluster' });
    await admin('PUT', `/sources/${sourceId}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: hook }] } });
    nodes.push(...(await Promise.all([startChildSwitchyard(env), startChildSwitchyard(env)])));
    const victim = nodes[1]!;

    const acknowledged = new Set<string>();
    let requests = 0;
    const sender = async (worker: number): Promise<void> => {
      for (let i = 0; i < REQUESTS_PER_SENDER; i++) {
        const node = nodes[(worker + i) % nodes.length]!;
        if (node === victim && victim.process.signalCode !== null) continue; // dead: its share goes nowhere
        const ids = Array.from({ length: MESSAGES_PER_REQUEST }, (_, k) => `w${worker}-r${i}-m${k}`);
        requests++;
        try {
          const response = await fetch(`${node.url}/v1/batch`, {
            method: 'POST',
            headers: { authorization: basicAuth(writeKey), 'content-type': 'application/json' },
            body: JSON.stringify({ batch: ids.map((messageId) => ({ type: 'track', userId: 'u', event: 'E', messageId })) }),
          });
          await response.arrayBuffer();
          if (response.status === 200) for (const id of ids) acknowledged.add(id);
        } catch {
          // The killed node: the request was never acknowledged.
        }
      }
    };
    const senders = Array.from({ length: SENDERS }, (_, w) => sender(w));

    // Kill one node a third of the way through the load, while it has POSTs in flight.
    await eventually(() => (requests >= (SENDERS * REQUESTS_PER_SENDER) / 3 ? true : undefined), 60_000, 'load to build up');
    await eventually(async () => ((await leasedBy(db.url, victim.process.pid!)).size > 0 ? true : undefined), 30_000, 'the victim to hold leases');
    await victim.kill('SIGKILL');
    const heldByVictim = await leasedBy(db.url, victim.process.pid!);
    assert.ok(heldByVictim.size > 0, 'the kill caught the node with deliveries leased (else the lease path went untested)');
    await Promise.all(senders);
    assert.ok(acknowledged.size > 1_000, `enough load: ${acknowledged.size} acknowledged`);

    // Not a fixed deadline: on a loaded machine (CI runs other suites beside
    // this one) the receiver in this process answers slowly, attempts time
    // out, and the origin's deliveries are held back at the pace it answers
    // (seen: 66 of 4,725 still queued, never attempted, after 90 s). What
    // must not happen is a stall: a message that is lost never arrives
    // however long one waits, so the wait fails once nothing new has arrived
    // for STALL_MS, or after MAX_DRAIN_MS in all.
    const missing = (): string[] => [...acknowledged].filter((id) => !received.has(id));
    const lost = await whileProgressing(() => missing().length);
    if (lost > 0) {
      const ids = missing();
      const where = await whereAre(db.url, ids.slice(0, 20));
      assert.fail(`${ids.length} of ${acknowledged.size} acknowledged messages never arrived; where they are: ${JSON.stringify(where)}`);
    }

    // Only now can the count of duplicates be final: the dead node's leases
    // must run out and those jobs be delivered again.
    assert.equal(await whileProgressing(() => pendingDeliveries(db.url)), 0, 'the queue drained');
    const duplicates = [...received].filter(([, count]) => count > 1).map(([id]) => id);
    const retriedIds = await retried(db.url);
    t.diagnostic(
      `${acknowledged.size} acknowledged; ${heldByVictim.size} leased by the killed node when it died; ` +
        `${retriedIds.size} retried after a failed attempt; ${duplicates.length} received more than once`,
    );
    const unexplained = duplicates.filter((id) => !heldByVictim.has(id) && !retriedIds.has(id));
    assert.deepEqual(unexplained, [], 'received twice, yet neither leased by the killed node nor retried');
  });
});

/** Runs one query on its own connection: the test's view of the database, from outside the nodes. */
async function sql<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Polls `left` (a count that only goes down as work is done) until it is 0,
 * or until it has not gone down for {@link STALL_MS}, or for at most
 * {@link MAX_DRAIN_MS}; returns the last count.
 */
async function whileProgressing(left: () => number | Promise<number>): Promise<number> {
  const start = Date.now();
  let count = await left();
  let progressAt = Date.now();
  while (count > 0 && Date.now() - progressAt < STALL_MS && Date.now() - start < MAX_DRAIN_MS) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const now = await left();
    if (now < count) progressAt = Date.now();
    count = now;
  }
  return count;
}

/** Where the store has each of these messages: for a failure's message, so that a loss says which stage holds it. */
async function whereAre(url: string, messageIds: readonly string[]): Promise<unknown[]> {
  const stored = await sql<Record<string, unknown>>(
    url,
    `SELECT m.message_id, m.status AS message_status, d.id, d.status, d.lease_owner, d.next_attempt_at, d.after_id,
       d.attempt_count, (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = d.id) AS attempt_rows
     FROM messages m LEFT JOIN deliveries d ON d.message_seq = m.seq WHERE m.message_id = ANY($1)`,
    [messageIds],
  );
  const found = new Set(stored.map((row) => row['message_id']));
  const raw = await sql<{ n: number }>(url, `SELECT count(*)::int AS n FROM raw_requests`);
  return [...stored, { notStored: messageIds.filter((id) => !found.has(id)), rawRequestsLeft: raw[0]!.n, now: Date.now() }];
}

async function pendingDeliveries(url: string): Promise<number> {
  const [row] = await sql<{ n: number }>(url, `SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending'`);
  return row!.n;
}

/** messageIds of the pending deliveries whose lease the process `pid` holds (worker owners are `host:pid:token`). */
async function leasedBy(url: string, pid: number): Promise<Set<string>> {
  const rows = await sql<{ message_id: string }>(
    url,
    `SELECT m.message_id FROM deliveries d JOIN messages m ON m.seq = d.message_seq
     WHERE d.status = 'pending' AND d.lease_owner LIKE $1`,
    [`%:${pid}:%`],
  );
  return new Set(rows.map((r) => r.message_id));
}

/** messageIds with a recorded attempt that did not succeed (e.g. the receiver answered after the timeout). */
async function retried(url: string): Promise<Set<string>> {
  const rows = await sql<{ message_id: string }>(
    url,
    `SELECT DISTINCT m.message_id FROM delivery_attempts a
       JOIN deliveries d ON d.id = a.delivery_id JOIN messages m ON m.seq = d.message_seq
     WHERE a.status_code IS NULL OR a.status_code NOT BETWEEN 200 AND 299`,
  );
  return new Set(rows.map((r) => r.message_id));
}
