/**
 * What the delivery benches share: a webhook receiver in its own process,
 * Switchyard on a store of its own (temp dir or scratch database) with one
 * source whose signed Webhooks destination points at the receiver, a way to
 * fill the delivery queue directly through the store adapter while
 * Switchyard is stopped, and the measurement of a drain.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { EngageRunner } from '../../src/engage/engage-runner.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { DeliveryTarget } from '../../src/domain/routing.js';
import type { IngestEntry, SourceRecord, Store } from '../../src/store/store.js';
import { newMessageId } from '../../src/util/ids.js';
import type { BenchContext } from './bench-types.js';
import { makeTempDir, registerCleanup, removeTempDir, spawnManaged } from './children.js';
import { PREFILL_CHUNK, appendBacklog, entryMaker } from './delivery-bodies.js';
import { preciseNow } from './delivery-protocol.js';
import { Receiver, type ReceiverPoint } from './delivery-receiver-client.js';
import { freePort } from './free-port.js';
import { createScratchDatabase, type ScratchDatabase } from './postgres-db.js';
import { machineCpu } from './proc-stats.js';
import { type Target, waitHealthy, watchChild } from './target.js';
import { waitForQuiet } from './wait-for-quiet.js';

const SWITCHYARD_BIN = fileURLToPath(new URL('../../../bin/switchyard.js', import.meta.url));
export const SHARED_SECRET = 'bench-shared-secret';
const ENGAGE_CATCH_UP_TIMEOUT_MS = 300_000;

export interface Rig {
  readonly receiver: Receiver;
  readonly source: SourceRecord;
  /** `Basic …` for the source's write key. */
  readonly authorization: string;
  /** For admin calls to the rig's servers (see `admin`). */
  readonly adminToken: string;
  /** Prefix of the prefilled messageIds (the baseline poster rebuilds the same bodies from it). */
  readonly idPrefix: string;
  /** `receivedAt` of every prefilled message. */
  readonly receivedAt: number;
  /** Starts `switchyard serve` on the rig's store; profiled when --cpu-prof is given and `profile` is set. */
  launch(label: string, profile: boolean): Promise<Target>;
  /**
   * Appends `count` accepted messages (one pending webhooks delivery each, or
   * none with `deliveries: false`: stored history, e.g. for a replay) after
   * those already there. Switchyard must be stopped.
   */
  prefill(
    count: number,
    onProgress?: (done: number) => void,
    /**
     * `orderedKeys`: the deliveries are ordered (`ordering: "user"`), message i keyed `user-${i % orderedKeys}`;
     * `destination`: whose job each message gets (`webhooks`, the default, or `function:<id>`).
     */
    options?: { readonly deliveries?: boolean; readonly orderedKeys?: number; readonly destination?: DeliveryTarget },
  ): Promise<PrefillFigures>;
  /**
   * How many stored messages Engage has yet to read (seqs past its cursor),
   * read beside a running Switchyard; undefined before Engage's first commit.
   */
  engageBacklog(): Promise<number | undefined>;
  /**
   * Lets Engage read every stored message, as a running Switchyard's Engage
   * reads each message as it arrives: Engage's own runner (the one `serve`
   * runs) works on the rig's store until its cursor is at the last message,
   * writing the profiles and the cursor exactly as it would have. Delivery
   * jobs are left untouched. Switchyard must be stopped.
   */
  catchUpEngage(): Promise<EngageCatchUp>;
  /** Runs `work` on a migrated store handle of the rig's store (closed after). Switchyard must be stopped. */
  withStore<T>(work: (store: Store) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface EngageCatchUp {
  /** Messages Engage read. */
  readonly messages: number;
  readonly seconds: number;
}

export interface PrefillFigures {
  readonly jobs: number;
  readonly seconds: number;
  readonly jobsPerSec: number;
  readonly chunk: number;
}

/**
 * Creates the rig: starts the receiver on the load generator's CPU, starts
 * Switchyard once on a fresh store to create the schema, the source and the
 * destination through the admin API, and leaves it running only when
 * `keepRunning` (then the returned target is that server).
 */
export async function createRig(context: BenchContext, label: string, keepRunning = false): Promise<{ rig: Rig; running: Target | undefined }> {
  const { options } = context;
  const dataDir = makeTempDir('switchyard-delivery-bench-');
  let database: ScratchDatabase | undefined;
  let receiver: Receiver | undefined;
  const cleanup = registerCleanup(async () => {
    await receiver?.stop();
    removeTempDir(dataDir);
    await database?.drop();
  });
  try {
    if (options.store === 'postgres') database = await createScratchDatabase(options.postgresUrl);
    receiver = await Receiver.start(context.cpus.loadGenerator);
    const adminToken = randomBytes(16).toString('hex');
    const databaseUrl = database?.url;
    const durability = process.env['SWITCHYARD_DURABILITY'] === 'fsync' ? 'fsync' : 'process';

    const launch = async (launchLabel: string, profile: boolean): Promise<Target> => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        SWITCHYARD_DATA_DIR: dataDir,
        SWITCHYARD_ADMIN_TOKEN: adminToken,
        SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
        LOG_LEVEL: 'warn',
        DATABASE_URL: databaseUrl ?? '',
      };
      const profiling = profile && options.cpuProfileDir !== undefined ? ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir] : [];
      const child = spawnManaged(launchLabel, process.execPath, ['--no-node-snapshot', ...profiling, SWITCHYARD_BIN, 'serve'], { cpus: context.cpus.server, env });
      const target = watchChild(launchLabel, child, url, {});
      try {
        await waitHealthy(child, url, launchLabel);
      } catch (error) {
        await target.stop();
        throw error;
      }
      return target;
    };

    const setup = await launch(`${label} switchyard (setup)`, keepRunning);
    let source: SourceRecord;
    try {
      const created = await admin(setup.url, adminToken, 'POST', '/admin/v1/sources', { name: 'delivery-bench' }, 201);
      const id = String(created['id']);
      await admin(setup.url, adminToken, 'PUT', `/admin/v1/sources/${id}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: receiver.hookUrl }], sharedSecret: SHARED_SECRET },
      }, 200);
      source = { id, name: 'delivery-bench', writeKey: String(created['writeKey']), enabled: true, createdAt: 0, updatedAt: 0 };
      if (!keepRunning) await setup.stop();
    } catch (error) {
      await setup.stop();
      throw error;
    }

    const idPrefix = `bench${randomBytes(3).toString('hex')}`;
    const receivedAt = Date.now();
    let prefilled = 0;
    const openStore = (): Store =>
      databaseUrl === undefined ? SqliteStore.open({ dataDir, durability }) : PostgresStore.open({ databaseUrl, durability });

    const rig: Rig = {
      receiver,
      source,
      authorization: `Basic ${Buffer.from(`${source.writeKey}:`).toString('base64')}`,
      adminToken,
      idPrefix,
      receivedAt,
      launch,
      async prefill(count, onProgress, { deliveries = true, orderedKeys, destination = 'webhooks' } = {}) {
        const store = openStore();
        const started = performance.now();
        try {
          await store.migrate();
          const stored = await store.getSource(source.id);
          if (stored === undefined) throw new Error(`source ${source.id} is not in the store`);
          const makeEntries = entryMaker(stored, { idPrefix, receivedAt }, [destination]);
          const entriesFrom = (from: number, size: number): IngestEntry[] => {
            const first = prefilled + from;
            const made = makeEntries(first, size);
            const entries = orderedKeys === undefined ? made : made.map((entry, i) => ({ ...entry, orderKey: `user-${(first + i) % orderedKeys}` }));
            return deliveries ? entries : entries.map((entry) => ({ ...entry, destinations: [] }));
          };
          await appendBacklog(store, entriesFrom, count, receivedAt, onProgress);
        } finally {
          await store.close();
        }
        prefilled += count;
        const seconds = (performance.now() - started) / 1000;
        return { jobs: count, seconds: round(seconds, 1), jobsPerSec: Math.round(count / seconds), chunk: PREFILL_CHUNK };
      },
      async engageBacklog() {
        const sql = 'SELECT (SELECT MAX(seq) FROM messages) - (SELECT cursor_seq FROM engage_state WHERE id = 1) AS behind';
        if (databaseUrl === undefined) {
          const db = new Database(path.join(dataDir, SQLITE_FILE), { readonly: true, fileMustExist: true });
          try {
            const row = db.prepare(sql).get() as { behind: number | null } | undefined;
            return row?.behind ?? undefined;
          } finally {
            db.close();
          }
        }
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          const { rows } = await client.query<{ behind: string | null }>(sql);
          return rows[0]?.behind === null || rows[0] === undefined ? undefined : Number(rows[0].behind);
        } finally {
          await client.end();
        }
      },
      async catchUpEngage() {
        const store = openStore();
        const started = performance.now();
        const errors: unknown[] = [];
        try {
          await store.migrate();
          const from = await store.getEngageCursor();
          const runner = new EngageRunner({ store, now: Date.now, newMessageId, pollMs: 200, onError: (error) => errors.push(error) });
          runner.start();
          let cursor = from;
          try {
            const deadline = Date.now() + ENGAGE_CATCH_UP_TIMEOUT_MS;
            for (;;) {
              if (errors.length > 0) throw new Error('Engage failed while reading the prefilled messages', { cause: errors[0] });
              cursor = await store.getEngageCursor();
              if ((await store.listMessagesSince(cursor, 1)).length === 0) break;
              if (Date.now() > deadline) throw new Error(`Engage had not read the prefilled messages after ${ENGAGE_CATCH_UP_TIMEOUT_MS / 1000} s (cursor ${cursor})`);
              await new Promise((resolve) => setTimeout(resolve, 100));
            }
          } finally {
            // Releases the Engage lease, so that the next server takes it at once.
            await runner.stop();
          }
          return { messages: cursor - from, seconds: round((performance.now() - started) / 1000, 1) };
        } finally {
          await store.close();
        }
      },
      async withStore(work) {
        const store = openStore();
        try {
          await store.migrate();
          return await work(store);
        } finally {
          await store.close();
        }
      },
      close: cleanup,
    };
    return { rig, running: keepRunning ? setup : undefined };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** One admin API call with the rig's token; throws unless it answers `expect`. */
export async function admin(url: string, token: string, method: string, path: string, body: unknown, expect: number): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== expect) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** A process whose CPU a drain counts as the sender's (Switchyard, or the baseline poster). */
export interface Watched {
  readonly pid: number;
  cpuSeconds(): number | undefined;
  failure(): string | undefined;
}

export interface DrainPlan {
  /** The receiver phase, already reset, with `startCount` and `endCount` among its marks. */
  readonly total: number;
  /** The window opens at this count or `warmupSec` after the first delivery, whichever comes first. */
  readonly startCount: number;
  readonly warmupSec: number;
  /** The window closes at this count or `windowSec` after it opened, whichever comes first. */
  readonly endCount: number;
  readonly windowSec: number;
  /** Gives up (reporting what was measured) this long after the call. */
  readonly timeoutSec: number;
}

export interface DrainFigures {
  /** Deliveries the receiver saw per second within the window: the figure that counts. */
  readonly deliveriesPerSec: number;
  readonly windowDeliveries: number;
  readonly windowSec: number;
  /** How the window ended: at `endCount`, after `windowSec`, or cut short by the timeout. */
  readonly windowEnd: 'count' | 'time' | 'timeout';
  /** From the sender's start (Switchyard's spawn, the poster's first POST) to the first delivery. */
  readonly firstDeliveryAfterSec: number | undefined;
  /** Deliveries seen when the window closed. */
  readonly deliveredAtEnd: number;
  /**
   * Deliveries per CPU-second of the sending process (Switchyard or the
   * poster): less sensitive than the rate to other people's work taking the
   * sender's CPU on a shared machine, which shows in `otherCpuPercent`.
   */
  readonly deliveriesPerSenderCpuSec: number | undefined;
  /** CPU of the sending process, all its threads, per delivery in the window (µs): the same figure inverted. */
  readonly cpuMicrosPerDelivery: number | undefined;
  /** 100 = one CPU. */
  readonly senderCpuPercent: number | undefined;
  readonly receiverCpuPercent: number | undefined;
  /** CPU used by everything else on the machine in the window, and CPU the hypervisor withheld. */
  readonly otherCpuPercent: number | undefined;
  readonly stealPercent: number | undefined;
}

interface Snapshot {
  readonly point: ReceiverPoint;
  readonly sender: number | undefined;
  readonly receiver: number | undefined;
  readonly machine: ReturnType<typeof machineCpu>;
}

/**
 * Measures the receiver's arrival rate over a window of a drain that has
 * just started: the warm-up (connections, JIT, first claims) and the tail
 * are left out. Never throws on a timeout: what was measured is reported.
 */
export async function measureDrain(receiver: Receiver, sender: Watched, plan: DrainPlan, since: number = preciseNow()): Promise<DrainFigures> {
  const deadline = Date.now() + plan.timeoutSec * 1000;
  const snapshot = (point: ReceiverPoint): Snapshot => ({ point, sender: sender.cpuSeconds(), receiver: receiver.cpuSeconds(), machine: machineCpu() });
  const remaining = (): number => Math.max(0, deadline - Date.now());

  let firstAt: number | undefined;
  const sawFirst = await receiver.waitFor((point) => point.count > 0, remaining(), () => sender.failure());
  if (sawFirst) firstAt = receiver.current.at;

  let start: Snapshot | undefined;
  if (firstAt !== undefined) {
    const warmupEnd = firstAt + plan.warmupSec * 1000;
    await receiver.waitFor(
      (point) => {
        if (point.count >= plan.startCount || point.at >= warmupEnd) start = snapshot(point);
        return start !== undefined;
      },
      remaining(),
      () => sender.failure(),
    );
  }

  let end: Snapshot | undefined;
  let windowEnd: DrainFigures['windowEnd'] = 'timeout';
  if (start !== undefined) {
    const opened = start;
    const closeAt = opened.point.at + plan.windowSec * 1000;
    const closed = await receiver.waitFor(
      (point) => {
        if (point.count >= plan.endCount) windowEnd = 'count';
        else if (point.at >= closeAt) windowEnd = 'time';
        else return false;
        end = snapshot(point);
        return true;
      },
      remaining(),
      () => sender.failure(),
    );
    if (!closed) end = snapshot(receiver.current);
  }

  const seconds = start !== undefined && end !== undefined ? (end.point.at - start.point.at) / 1000 : 0;
  const delivered = start !== undefined && end !== undefined ? end.point.count - start.point.count : 0;
  const percent = (from: number | undefined, to: number | undefined): number | undefined =>
    from === undefined || to === undefined || seconds <= 0 ? undefined : Math.round(((to - from) / seconds) * 100);
  let other: number | undefined;
  let steal: number | undefined;
  if (start?.machine !== undefined && end?.machine !== undefined && seconds > 0) {
    const busy = end.machine.busySec - start.machine.busySec;
    const ours = (end.sender ?? 0) - (start.sender ?? 0) + (end.receiver ?? 0) - (start.receiver ?? 0);
    other = Math.max(0, Math.round(((busy - ours) / seconds) * 100));
    steal = Math.round(((end.machine.stealSec - start.machine.stealSec) / seconds) * 100);
  }
  return {
    deliveriesPerSec: seconds > 0 ? Math.round(delivered / seconds) : 0,
    windowDeliveries: delivered,
    windowSec: round(seconds, 2),
    windowEnd,
    firstDeliveryAfterSec: firstAt === undefined ? undefined : round((firstAt - since) / 1000, 2),
    deliveredAtEnd: (end ?? start)?.point.count ?? receiver.current.count,
    deliveriesPerSenderCpuSec:
      start?.sender === undefined || end?.sender === undefined || end.sender <= start.sender ? undefined : Math.round(delivered / (end.sender - start.sender)),
    cpuMicrosPerDelivery:
      start?.sender === undefined || end?.sender === undefined || delivered <= 0 ? undefined : Math.round(((end.sender - start.sender) * 1e6) / delivered),
    senderCpuPercent: percent(start?.sender, end?.sender),
    receiverCpuPercent: percent(start?.receiver, end?.receiver),
    otherCpuPercent: other,
    stealPercent: steal,
  };
}

/** Waits for a quiet machine when --wait-quiet asks for it. */
export async function maybeWaitQuiet(context: BenchContext, name: string): Promise<void> {
  if (context.options.quietWaitSec <= 0) return;
  const { waitedSec, quiet } = await waitForQuiet(context.options.quietWaitSec);
  if (!quiet) context.log(`${name}: the machine is still busy after ${waitedSec} s; measuring anyway`);
}

export function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
