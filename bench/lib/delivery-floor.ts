/**
 * The store floor of delivery.throughput, run as its own process in
 * Switchyard's place: the least Switchyard's design must do per delivery,
 * and nothing else. It prefills its own embedded store (a temp folder,
 * before it reports `ready`) with the messages and delivery jobs the rig
 * gives Switchyard (the same ids and bodies, under a stand-in source as the
 * poster's bodies are), then drains them as the delivery worker does at
 * its core:
 *
 * - jobs claimed with a lease through the store adapter (`claimDeliveries`,
 *   up to the worker's in-flight limit, again once half of it is free);
 * - each job's webhook body made from the stored message and signed
 *   (X-Signature), then POSTed through an undici Agent with the worker's
 *   connections per origin, through undici's dispatch API as WebhookSender does;
 * - each answer recorded as a succeeded outcome with its attempt, in batches
 *   (`finishDeliveries`, as OutcomeBatcher writes them).
 *
 * No circuit breaker, origin slots, rate caps, retry decisions, metrics,
 * spans or response keeping: what the worker adds on top of this is
 * Switchyard's ratio to the floor; what the store adds is the floor's ratio
 * to the bare baseline (lib/delivery-poster.ts).
 *
 * With `log` after the arguments it drains the same messages as the
 * proposed delivery log would instead (docs/architecture.md, "What bounds
 * `delivery.throughput` on one CPU"): no delivery rows are read or
 * written; it reads the source's accepted messages after a cursor, in
 * pages (no write, so no write lock), and writes the cursor (one row) as
 * the deliveries before it complete, batched as outcomes are. A failure
 * or a retry would be a row of its own; this backlog has none.
 *
 * With `log-successes` it drains the delivery log and also keeps every
 * success's attempt, as the design's `delivery_successes` does
 * (docs/design/delivery-log.md): one row per cursor step, in the same
 * transaction, holding the attempts of the seqs the cursor passed as JSON.
 * Its attempts are those the claims floor records (time, URL, status).
 *
 * Speaks the poster's protocol (PosterArgs in, PosterLine out).
 * Usage: node dist/bench/lib/delivery-floor.js '<PosterArgs JSON>' [log | log-successes]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Agent, type Dispatcher } from 'undici';
import { webhookBody } from '../../src/domain/webhook-payload.js';
import { signBody } from '../../src/delivery/signer.js';
import { defaultWorkerLimits } from '../../src/delivery/delivery-worker.js';
import { loadConfig } from '../../src/config.js';
import type { AttemptRecord, SourceRecord } from '../../src/store/records.js';
import type { DeliveryOutcome } from '../../src/store/store.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { appendBacklog, entryMaker } from './delivery-bodies.js';
import { type PosterArgs, type PosterLine, PostTally } from './delivery-protocol.js';

/** As the worker: a batch of outcomes is written at this size or this long after its first one. */
const OUTCOME_BATCH = 256;
const OUTCOME_DELAY_MS = 10;
const OWNER = 'delivery-floor';

function send(line: PosterLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** One POST through undici's dispatch API: resolves the status code, or the error that ended it. */
function post(agent: Agent, origin: string, pathname: string, headers: Record<string, string>, body: string): Promise<number | Error> {
  return new Promise((resolve) => {
    let status = 0;
    const handler: Dispatcher.DispatchHandler = {
      // Its presence tells undici this handler speaks the controller API, as WebhookSender's does.
      onRequestStart: () => undefined,
      onResponseStart: (_controller, statusCode) => {
        status = statusCode;
      },
      onResponseEnd: () => resolve(status),
      onResponseError: (_controller, error) => resolve(error),
    };
    agent.dispatch({ origin, path: pathname, method: 'POST', headers, body }, handler);
  });
}

/** What a drain needs from main: where to POST, and how to count and end. */
interface Drain {
  readonly args: PosterArgs;
  readonly agent: Agent;
  readonly target: URL;
  readonly tally: PostTally;
  readonly maxInFlight: number;
}

/** One job: its webhook body signed and POSTed; resolves when the answer is in (counted in the tally). */
async function deliverOne(drain: Drain, stored: string): Promise<number | undefined> {
  const { args, agent, target, tally } = drain;
  const body = webhookBody(stored) ?? stored;
  const headers = { 'user-agent': args.userAgent, 'content-type': 'application/json', 'x-signature': signBody(body, args.sharedSecret) };
  const answer = await post(agent, target.origin, target.pathname, headers, body);
  tally.record(answer);
  return answer instanceof Error ? undefined : answer;
}

/**
 * Writes what `add` is given in batches: at `OUTCOME_BATCH` items or
 * `OUTCOME_DELAY_MS` after the first, as the worker's OutcomeBatcher does.
 */
function batchedWriter<T>(write: (batch: T[]) => Promise<void>): { add(item: T): void; flush(): Promise<void> } {
  let pending: T[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing = Promise.resolve();
  const writeNow = (): void => {
    clearTimeout(timer);
    timer = undefined;
    const batch = pending;
    pending = [];
    if (batch.length > 0) writing = writing.then(() => write(batch));
  };
  return {
    add(item: T) {
      pending.push(item);
      if (pending.length >= OUTCOME_BATCH) writeNow();
      else timer ??= setTimeout(writeNow, OUTCOME_DELAY_MS);
    },
    async flush() {
      writeNow();
      await writing;
    },
  };
}

/**
 * Keeps up to `maxInFlight` jobs in flight: `fetchMore(room)` is asked for
 * more once half of them are free, and the drain ends when it finds none.
 */
async function keepInFlight<J>(drain: Drain, fetchMore: (room: number) => Promise<J[]>, deliver: (job: J) => Promise<void>): Promise<void> {
  const { maxInFlight } = drain;
  const fetchAtLeast = Math.floor(maxInFlight / 2);
  let inFlight = 0;
  let fetching = false;
  let drained = false;
  let finished!: () => void;
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const run = async (job: J): Promise<void> => {
    await deliver(job);
    inFlight -= 1;
    if (maxInFlight - inFlight >= fetchAtLeast) void fetch();
    if (drained && inFlight === 0) finished();
  };
  const fetch = async (): Promise<void> => {
    if (fetching || drained) return;
    fetching = true;
    try {
      const jobs = await fetchMore(maxInFlight - inFlight);
      if (jobs.length === 0) {
        drained = true;
        if (inFlight === 0) finished();
        return;
      }
      inFlight += jobs.length;
      for (const job of jobs) void run(job);
    } finally {
      fetching = false;
    }
  };
  await fetch();
  await allDone;
}

/** Today's queue: jobs claimed with a lease, each answer a succeeded outcome with its attempt. */
async function drainClaims(drain: Drain, store: SqliteStore, leaseMs: number): Promise<void> {
  const outcomes = batchedWriter<DeliveryOutcome>((batch) => store.finishDeliveries(batch).then(() => undefined));
  await keepInFlight(
    drain,
    (room) => store.claimDeliveries({ owner: OWNER, limit: room, leaseMs, now: Date.now() }),
    async (job) => {
      const statusCode = await deliverOne(drain, job.body);
      const at = Date.now();
      outcomes.add({ kind: 'succeeded', id: job.id, owner: OWNER, at, firstAttemptAt: at, attempts: [{ at, url: drain.args.url, statusCode, durationMs: 0 }] });
    },
  );
  await outcomes.flush();
}

/** A delivery the log's cursor passed: its seq and its one (successful) attempt. */
interface Passed {
  readonly seq: number;
  readonly attempt: AttemptRecord;
}

/**
 * The delivery log: the source's accepted messages after a cursor, and the
 * cursor moved past every delivery before it that has completed. Reads
 * take no write lock; the only write is the cursor's one row per batch,
 * and with `keepSuccesses` one `delivery_successes` row beside it.
 */
async function drainLog(drain: Drain, dataDir: string, sourceId: string, keepSuccesses: boolean): Promise<void> {
  const db = new Database(path.join(dataDir, SQLITE_FILE));
  try {
    db.exec(`CREATE TABLE delivery_log_cursor (destination TEXT PRIMARY KEY, seq INTEGER NOT NULL)`);
    db.exec(`CREATE TABLE delivery_successes (
      source_id TEXT NOT NULL, destination TEXT NOT NULL,
      to_seq INTEGER NOT NULL, from_seq INTEGER NOT NULL, at INTEGER NOT NULL, attempts TEXT NOT NULL,
      PRIMARY KEY (source_id, destination, to_seq)) WITHOUT ROWID`);
    db.prepare(`INSERT INTO delivery_log_cursor VALUES ('webhooks', 0)`).run();
    const page = db.prepare<[string, number, number], { seq: number; body: string }>(
      `SELECT seq, body FROM messages WHERE source_id = ? AND seq > ? AND status = 'accepted' ORDER BY seq LIMIT ?`,
    );
    const moveCursor = db.prepare<[number]>(`UPDATE delivery_log_cursor SET seq = ? WHERE destination = 'webhooks'`);
    const addSuccesses = db.prepare<[string, number, number, number, string]>(
      `INSERT INTO delivery_successes (source_id, destination, to_seq, from_seq, at, attempts) VALUES (?, 'webhooks', ?, ?, ?, ?)`,
    );
    let cursorAt = 0;
    const step = db.transaction((batch: readonly Passed[]) => {
      const to = batch[batch.length - 1]!.seq;
      moveCursor.run(to);
      // As the design's rows: [[seq, slot, firstAttemptAt, [attempt]], …] for the seqs in (from, to].
      const attempts = batch.map(({ seq, attempt }) => [seq, 0, attempt.at, [attempt]]);
      addSuccesses.run(sourceId, to, cursorAt, Date.now(), JSON.stringify(attempts));
      cursorAt = to;
    });
    // Seqs read and not yet completed, in order: the cursor may pass only completed ones.
    const open: number[] = [];
    const completed = new Map<number, AttemptRecord>();
    let readUpTo = 0;
    const cursor = batchedWriter<Passed>(async (batch) => {
      if (keepSuccesses) step(batch);
      else moveCursor.run(batch[batch.length - 1]!.seq);
    });
    await keepInFlight(
      drain,
      async (room) => {
        const rows = page.all(sourceId, readUpTo, room);
        if (rows.length > 0) readUpTo = rows[rows.length - 1]!.seq;
        for (const row of rows) open.push(row.seq);
        return rows;
      },
      async (row) => {
        const statusCode = await deliverOne(drain, row.body);
        completed.set(row.seq, { at: Date.now(), url: drain.args.url, statusCode, durationMs: 0 });
        while (open.length > 0 && completed.has(open[0]!)) {
          const seq = open.shift()!;
          cursor.add({ seq, attempt: completed.get(seq)! });
          completed.delete(seq);
        }
      },
    );
    await cursor.flush();
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: delivery-floor <PosterArgs JSON> [log | log-successes]');
  const args = JSON.parse(raw) as PosterArgs;
  const queue = process.argv[3] ?? 'claims';
  if (!['claims', 'log', 'log-successes'].includes(queue)) throw new Error(`unknown queue ${JSON.stringify(queue)}: claims, log or log-successes`);
  const { maxInFlight, leaseMs } = defaultWorkerLimits(loadConfig({}, {}));

  const prepareStarted = performance.now();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-delivery-floor-'));
  const store = SqliteStore.open({ dataDir, durability: process.env['SWITCHYARD_DURABILITY'] === 'fsync' ? 'fsync' : 'process' });
  try {
    await store.migrate();
    const source: SourceRecord = { id: 'src_floor', name: 'floor', writeKey: 'floor-write-key', enabled: true, createdAt: 0, updatedAt: 0 };
    await store.insertSource(source);
    const makeEntries = entryMaker(source, { idPrefix: args.idPrefix, receivedAt: args.receivedAt });
    await appendBacklog(store, makeEntries, args.count, args.receivedAt);
    send({ event: 'ready', prepareSec: Math.round(performance.now() - prepareStarted) / 1000 });

    const agent = new Agent({ connections: args.concurrency });
    const drain: Drain = { args, agent, target: new URL(args.url), tally: new PostTally(), maxInFlight };
    if (queue === 'log' || queue === 'log-successes') await drainLog(drain, dataDir, source.id, queue === 'log-successes');
    else await drainClaims(drain, store, leaseMs);

    const done = drain.tally.done();
    await agent.close();
    send(done);
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  send({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
