/**
 * Function destinations on two `serve` processes sharing one PostgreSQL
 * database: a function made on one node is run by the other, versions
 * changed on one node are used by the other, every message reaches the
 * function's API once, and a node killed during a call leaves it to the
 * survivor once its lease runs out.
 *
 * Any node may process a message (raw rows are claimed with SKIP LOCKED)
 * and any node may deliver it (deliveries too), and the function's version
 * is read when the call is made. So to prove what one node knows, the other
 * is stopped while it is asked; it is started again for the next test.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { type FreshDatabase, describePostgres, freshDatabase, query } from '../helpers/postgres.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

/**
 * Each fetch may take this long, so a call held open by the stand-in stays
 * in flight this long: the window in which the test kills its node. The
 * lease is this + 30 s, which is what the kill test waits for.
 */
const DELIVERY_TIMEOUT_MS = 3_000;
/** Generous bounds on waits that take milliseconds when all is well (never asserted as timings). */
const PROPAGATION_DEADLINE_MS = 30_000;
const DELIVERY_DEADLINE_MS = 30_000;
/** The lease (delivery timeout + 30 s) plus a wide margin. */
const LEASE_DEADLINE_MS = DELIVERY_TIMEOUT_MS + 30_000 + 60_000;

/** Segment-style code: tells the tool's API (the stand-in) which message it got, and from which version of the code. */
const relay = (marker: string): string => `
const MARKER = ${JSON.stringify(marker)};
async function onTrack(event, settings) {
  const res = await fetch(settings.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messageId: event.messageId, marker: MARKER }),
  });
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

interface Received {
  readonly messageId: string;
  readonly marker: string;
}

interface DeliveryView {
  id: number;
  status: string;
  destination: string;
  functionId?: string;
  messageId?: string;
}

interface AttemptView {
  url: string;
  function?: { version: number; outcome: string; fetches: Array<{ method: string; url: string; status?: number }> };
}

await describePostgres('function destinations on two PostgreSQL nodes', () => {
  let db: FreshDatabase;
  const nodes: { A?: ChildSwitchyard; B?: ChildSwitchyard } = {};
  const started: ChildSwitchyard[] = [];
  let sourceId = '';
  let writeKey = '';
  let functionId = '';

  // The function's API: records every request; holds open the ones `hold` picks (answered by `release`).
  const received: Received[] = [];
  let hold: (body: Received, nth: number) => boolean = () => false;
  const held = new Map<string, ServerResponse[]>();
  const standIn = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      let body: Received;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString()) as Received;
      } catch {
        response.writeHead(400).end();
        return;
      }
      received.push(body);
      const nth = received.filter((r) => r.messageId === body.messageId).length;
      if (hold(body, nth)) held.set(body.messageId, [...(held.get(body.messageId) ?? []), response]);
      else response.writeHead(200).end('ok');
    });
  });
  const release = (messageId: string): void => {
    for (const response of held.get(messageId) ?? []) if (!response.destroyed) response.writeHead(200).end('ok');
    held.delete(messageId);
  };
  const countOf = (messageId: string): number => received.filter((r) => r.messageId === messageId).length;

  const env = (): Record<string, string> => ({
    DATABASE_URL: db.url,
    SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
    SWITCHYARD_DELIVERY_TIMEOUT_MS: String(DELIVERY_TIMEOUT_MS),
    SWITCHYARD_RETRY_BASE_MS: '20',
    SWITCHYARD_RETRY_MAX_DELAY_MS: '200',
  });
  const start = async (name: 'A' | 'B'): Promise<ChildSwitchyard> => {
    const node = await startChildSwitchyard(env());
    started.push(node);
    nodes[name] = node;
    // /healthz answers before the stage thread (processing and delivery, with its own config cache) has
    // loaded the config; a node counts as running, for what it must learn from the other, once /readyz says so.
    await eventually(
      async () => {
        const response = await fetch(`${node.url}/readyz`).catch(() => undefined);
        await response?.arrayBuffer();
        return response?.status === 200 ? true : undefined;
      },
      30_000,
      `${node.url} to be ready`,
    );
    return node;
  };
  /** The node, started again if a test stopped it. */
  const up = async (name: 'A' | 'B'): Promise<ChildSwitchyard> => {
    const node = nodes[name];
    if (node !== undefined && node.process.exitCode === null && node.process.signalCode === null) return node;
    return start(name);
  };
  /** Stops the node gracefully, so that only the other one can process and deliver. */
  const stop = async (name: 'A' | 'B'): Promise<void> => {
    await nodes[name]?.kill('SIGTERM');
    nodes[name] = undefined;
  };

  const admin = async (node: ChildSwitchyard, method: string, route: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${node.url}/admin/v1${route}`, {
      method,
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = response.status === 204 ? undefined : await response.json();
    assert.ok(response.ok, `${node.url} ${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const track = async (node: ChildSwitchyard, messageId: string): Promise<void> => {
    const response = await fetch(`${node.url}/v1/track`, {
      method: 'POST',
      headers: { authorization: basicAuth(writeKey), 'content-type': 'application/json' },
      body: JSON.stringify({ userId: `user-${messageId}`, event: 'Order Completed', messageId }),
    });
    const text = await response.text();
    assert.equal(response.status, 200, `${node.url} /v1/track ${messageId}: ${text}`);
  };
  /**
   * Sends a probe track to `node` every 250 ms until the stand-in gets one
   * with `marker`: the node's caches have the change. Probes sent before it
   * are routed (or run) by the config as it was, which is expected.
   */
  const probeUntil = async (node: ChildSwitchyard, prefix: string, marker: string): Promise<number> => {
    let sent = 0;
    const deadline = Date.now() + PROPAGATION_DEADLINE_MS;
    while (Date.now() < deadline) {
      await track(node, `${prefix}-${sent++}`);
      const seen = await eventually(() => (received.some((r) => r.messageId.startsWith(`${prefix}-`) && r.marker === marker) ? true : undefined), 250).catch(() => false);
      if (seen) return sent;
    }
    assert.fail(`${sent} probes sent to ${node.url} over ${PROPAGATION_DEADLINE_MS} ms; none reached the function's API as "${marker}" (got: ${JSON.stringify(received.filter((r) => r.messageId.startsWith(`${prefix}-`)))})`);
  };
  const allArrived = (ids: readonly string[], marker: string): Promise<true> =>
    eventually(
      () => (ids.every((id) => received.some((r) => r.messageId === id && r.marker === marker)) ? true : undefined),
      DELIVERY_DEADLINE_MS,
      `${ids.length} messages at the function's API as "${marker}"`,
    ).catch((error: Error) => {
      const missing = ids.filter((id) => !received.some((r) => r.messageId === id && r.marker === marker));
      throw new Error(`${error.message}; missing as "${marker}": ${missing.join(', ')}; seen: ${JSON.stringify(received.filter((r) => ids.includes(r.messageId)))}`);
    });
  /** Every id's delivery, as `node`'s deliveries API lists it, once all are `succeeded`. */
  const succeeded = async (node: ChildSwitchyard, ids: readonly string[]): Promise<Map<string, DeliveryView>> =>
    eventually(
      async () => {
        const { deliveries } = (await admin(node, 'GET', `/deliveries?sourceId=${sourceId}&limit=1000`)) as { deliveries: DeliveryView[] };
        const byMessage = new Map(deliveries.filter((d) => d.messageId !== undefined && ids.includes(d.messageId)).map((d) => [d.messageId!, d]));
        return ids.every((id) => byMessage.get(id)?.status === 'succeeded') ? byMessage : undefined;
      },
      DELIVERY_DEADLINE_MS,
      `${node.url} to list ${ids.length} deliveries as succeeded`,
    );
  /** Checks the delivery's detail on `node`: its last attempt is the function's call, delivered with one POST answered 200. */
  const checkAttempt = async (node: ChildSwitchyard, delivery: DeliveryView, version: number): Promise<void> => {
    assert.equal(delivery.destination, 'function', `delivery ${delivery.id}`);
    assert.equal(delivery.functionId, functionId, `delivery ${delivery.id}`);
    const detail = (await admin(node, 'GET', `/deliveries/${delivery.id}`)) as { status: string; attempts: AttemptView[] };
    assert.equal(detail.status, 'succeeded', `${node.url}: delivery ${delivery.id}`);
    const last = detail.attempts.at(-1);
    assert.ok(last?.function !== undefined, `${node.url}: delivery ${delivery.id} has a function attempt: ${JSON.stringify(detail.attempts)}`);
    assert.equal(last.url, `function:${functionId}`);
    assert.equal(last.function.outcome, 'delivered');
    assert.equal(last.function.version, version, `${node.url}: delivery ${delivery.id} ran version ${version}`);
    assert.deepEqual(
      last.function.fetches.map((f) => [f.method, f.status]),
      [['POST', 200]],
      `${node.url}: delivery ${delivery.id} recorded its fetch`,
    );
  };
  const duplicatesAmong = (ids: readonly string[]): string[] => ids.filter((id) => countOf(id) > 1).map((id) => `${id}×${countOf(id)}`);

  before(async () => {
    db = await freshDatabase();
    standIn.listen(0, '127.0.0.1');
    await once(standIn, 'listening');
    // A migrates and holds the source; B starts once it exists.
    const a = await start('A');
    ({ id: sourceId, writeKey } = await admin(a, 'POST', '/sources', { name: 'fn-cluster' }));
    await start('B');
  });
  after(async () => {
    for (const id of [...held.keys()]) release(id);
    await Promise.all(started.map((node) => node.kill('SIGKILL')));
    standIn.closeAllConnections();
    standIn.close();
    await db?.drop();
  });

  const standInUrl = (): string => `http://127.0.0.1:${(standIn.address() as AddressInfo).port}/hook`;

  it('runs on node B a function destination created through node A', { timeout: 120_000 }, async (t) => {
    const a = await up('A');
    const b = await up('B');
    const fn = await admin(a, 'POST', `/sources/${sourceId}/destinations/functions`, { name: 'Relay', code: relay('v1'), settings: { url: standInUrl() } });
    functionId = fn.id;
    assert.equal(fn.version, 1);
    // Only B is left to process and deliver what it is sent: what reaches the stand-in is B's doing.
    await stop('A');

    const probes = await probeUntil(b, 'one-probe', 'v1');
    const ids = Array.from({ length: 5 }, (_, i) => `one-${i}`);
    for (const id of ids) await track(b, id);
    await allArrived(ids, 'v1');
    const listed = await succeeded(b, ids);
    for (const id of ids) await checkAttempt(b, listed.get(id)!, 1);
    t.diagnostic(`${probes} probe(s) sent to B before its first delivery through the function; duplicates: ${duplicatesAmong(ids).join(', ') || 'none'}`);
    assert.deepEqual(duplicatesAmong(ids), [], 'each message reached the function once');
  });

  it('delivers every track sent to either node through the function, once, and both deliveries APIs show it', { timeout: 120_000 }, async (t) => {
    assert.ok(functionId !== '', 'the function destination exists (made by the first test)');
    const a = await up('A');
    const b = await up('B');
    const ids = Array.from({ length: 20 }, (_, i) => `two-${i}`);
    await Promise.all(ids.map((id, i) => track(i % 2 === 0 ? a : b, id)));
    await allArrived(ids, 'v1');

    for (const node of [a, b]) {
      const listed = await succeeded(node, ids);
      for (const id of ids) await checkAttempt(node, listed.get(id)!, 1);
    }
    const duplicates = duplicatesAmong(ids);
    t.diagnostic(`${ids.length} tracks over A and B; received more than once: ${duplicates.join(', ') || 'none'}`);
    assert.deepEqual(duplicates, [], 'live nodes make each call once');
  });

  it('uses on node A a new version of the code PUT through node B', { timeout: 120_000 }, async (t) => {
    assert.ok(functionId !== '', 'the function destination exists (made by the first test)');
    const a = await up('A');
    const b = await up('B');
    const updated = await admin(b, 'PUT', `/sources/${sourceId}/destinations/functions/${functionId}`, { code: relay('v2') });
    assert.equal(updated.version, 2);
    // Only A is left: the version it runs is the one in A's caches.
    await stop('B');

    const probes = await probeUntil(a, 'three-probe', 'v2');
    const ids = Array.from({ length: 5 }, (_, i) => `three-${i}`);
    for (const id of ids) await track(a, id);
    await allArrived(ids, 'v2');
    assert.deepEqual(received.filter((r) => ids.includes(r.messageId) && r.marker !== 'v2'), [], 'no later track ran the old version');
    const listed = await succeeded(a, ids);
    for (const id of ids) await checkAttempt(a, listed.get(id)!, 2);
    t.diagnostic(`${probes} probe(s) sent to A before it ran version 2`);
    assert.deepEqual(duplicatesAmong(ids), [], 'each message reached the function once');
  });

  it('makes the call again on the surviving node after the node with the call in flight is killed', { timeout: LEASE_DEADLINE_MS + 60_000 }, async (t) => {
    assert.ok(functionId !== '', 'the function destination exists (made by the first test)');
    const running = { A: await up('A'), B: await up('B') };
    const crashId = 'four-crash';
    // The first call for the message is held open: a call in flight, on whichever node claimed the delivery.
    hold = (body, nth) => body.messageId === crashId && nth === 1;
    await track(running.A, crashId);
    await eventually(() => (held.has(crashId) ? true : undefined), DELIVERY_DEADLINE_MS, 'the function call to be in flight');

    const [job] = await query<{ id: string; lease_owner: string | null; attempt_count: number }>(
      db.url,
      `SELECT d.id, d.lease_owner, d.attempt_count FROM deliveries d JOIN messages m ON m.seq = d.message_seq WHERE m.message_id = $1`,
      [crashId],
    );
    assert.ok(job !== undefined && job.lease_owner !== null, `the delivery is leased while its call is in flight: ${JSON.stringify(job)}`);
    const victimName = (['A', 'B'] as const).find((name) => job.lease_owner!.includes(`:${running[name].process.pid}:`));
    assert.ok(victimName !== undefined, `the lease owner ${job.lease_owner} is one of the nodes (pids ${running.A.process.pid}, ${running.B.process.pid})`);
    const survivorName = victimName === 'A' ? 'B' : 'A';
    const victim = running[victimName];
    const survivor = running[survivorName];
    // The call is still open (its node has not given up on the fetch) as the node is killed.
    assert.ok(held.get(crashId)?.some((response) => !response.destroyed), 'the call was still open when its node was killed');
    await victim.kill('SIGKILL');
    nodes[victimName] = undefined;
    const [afterKill] = await query<{ attempt_count: number; lease_owner: string | null }>(db.url, `SELECT attempt_count, lease_owner FROM deliveries WHERE id = $1`, [job.id]);
    assert.equal(afterKill?.attempt_count, 0, 'the killed node recorded no outcome of the call');
    assert.equal(afterKill?.lease_owner, job.lease_owner, 'the killed node still holds the lease');

    // Meanwhile the survivor delivers new messages at once.
    const others = Array.from({ length: 5 }, (_, i) => `four-${i}`);
    for (const id of others) await track(survivor, id);
    await allArrived(others, 'v2');

    // Once the lease runs out, the survivor makes the call again; it is held until its lease is read.
    hold = (body, nth) => body.messageId === crashId && nth === 2;
    await eventually(() => (countOf(crashId) >= 2 ? true : undefined), LEASE_DEADLINE_MS, 'the call made again once the lease ran out');
    const [again] = await query<{ lease_owner: string | null }>(db.url, `SELECT lease_owner FROM deliveries WHERE id = $1`, [job.id]);
    assert.ok(again?.lease_owner?.includes(`:${survivor.process.pid}:`), `the survivor (${survivorName}, pid ${survivor.process.pid}) made the call again: lease ${again?.lease_owner}`);
    hold = () => false;
    release(crashId);

    const listed = await succeeded(survivor, [crashId, ...others]);
    for (const id of [crashId, ...others]) await checkAttempt(survivor, listed.get(id)!, 2);
    // Give a stray third call a moment to show, then count.
    await sleep(200);
    t.diagnostic(`the call was in flight on ${victimName} (killed); ${survivorName} called again; ${crashId} received ${countOf(crashId)} times`);
    assert.equal(countOf(crashId), 2, 'the killed call and the one made again, no more');
    assert.deepEqual(duplicatesAmong(others), [], 'the other messages reached the function once');
  });
});
