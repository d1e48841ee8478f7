import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { DestinationKind } from '../../domain/routing.js';
import { sha256Hex } from '../../util/crypto.js';
import type {
  AppendResult,
  ClaimRequest,
  ClaimedDelivery,
  DeliveryDetail,
  DeliveryFilter,
  DeliveryOutcome,
  DeliveryRecord,
  DestinationRecord,
  IngestEntry,
  RequeueFilter,
  SourcePatch,
  SourceRecord,
  Store,
  StoreCapabilities,
  StoreTopic,
  StoredMessage,
} from '../store.js';
import { ChangeListener, notifyStatement } from './change-listener.js';
import { clientConfig, describeDatabase, inTransaction } from './connection.js';
import * as deliveries from './delivery-queries.js';
import * as messages from './message-queries.js';
import { migrate } from './migrations.js';

export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/database?…` */
  readonly databaseUrl: string;
  /** `fsync` holds every session to `synchronous_commit = on`; `process` keeps the server's setting. */
  readonly durability: 'process' | 'fsync';
  /** Pooled connections, besides the one LISTEN connection. */
  readonly poolSize?: number;
  /** Errors nobody awaits: an idle pooled connection or the LISTEN connection dropping. */
  readonly onError?: (error: unknown) => void;
}

/**
 * Enough for ingest's one group commit at a time, the delivery worker's
 * claims and outcomes, and admin reads, without crowding a server's default
 * `max_connections` (100) when several nodes share it.
 */
export const DEFAULT_POOL_SIZE = 10;

interface SourceRow {
  id: string;
  name: string;
  write_key: string;
  enabled: boolean;
  created_at: number;
  updated_at: number;
}

interface DestinationRow {
  source_id: string;
  kind: DestinationKind;
  enabled: boolean;
  settings: string;
  updated_at: number;
}

/**
 * The scale-out store: several `serve` processes share one PostgreSQL
 * database. Each method that writes is one transaction (often one
 * statement); claims use `FOR UPDATE SKIP LOCKED` with leases, so nodes never
 * lease one delivery at once and a crashed node's leases run out for the
 * others to take. Changes are announced with NOTIFY in the writing
 * transaction; {@link subscribe} hears other nodes through one LISTEN
 * connection, opened on the first subscription, and this node's own writes
 * directly.
 *
 * Owns a pg.Pool and the LISTEN connection; {@link close} ends both.
 */
export class PostgresStore implements Store {
  readonly capabilities: StoreCapabilities = { name: 'postgres', multiNode: true };
  /** Tags this node's notifications, so that it does not hear its own. */
  private readonly nodeId = randomUUID();
  private readonly events = new EventEmitter();
  private readonly listener: ChangeListener;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
    listenerConfig: pg.ClientConfig,
    onError: (error: unknown) => void,
  ) {
    this.events.setMaxListeners(0);
    this.listener = new ChangeListener(listenerConfig, this.nodeId, (topic) => this.emit(topic), onError);
  }

  /** Connects lazily: the first query (usually {@link migrate}) opens a connection. */
  static open(options: PostgresStoreOptions): PostgresStore {
    const config = clientConfig(options.databaseUrl, options.durability);
    const onError = options.onError ?? (() => {});
    const pool = new pg.Pool({ ...config, max: options.poolSize ?? DEFAULT_POOL_SIZE, idleTimeoutMillis: 30_000 });
    // An idle connection that breaks (server restart, failover) is dropped
    // from the pool and replaced on demand; without a listener, pg's 'error'
    // event would crash the process.
    pool.on('error', onError);
    return new PostgresStore(pool, options.databaseUrl, config, onError);
  }

  async migrate(): Promise<void> {
    try {
      await this.pool.query('SELECT 1');
    } catch (error) {
      throw new Error(`could not connect to PostgreSQL at ${describeDatabase(this.databaseUrl)}: ${reasonOf(error)}`, { cause: error });
    }
    await migrate(this.pool);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.events.removeAllListeners();
      await this.listener.stop();
      await this.pool.end();
    })();
    return this.closing;
  }

  subscribe(listener: (topic: StoreTopic) => void): () => void {
    this.listener.start();
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  private emit(topic: StoreTopic): void {
    this.events.emit('change', topic);
  }

  /** Tells other nodes, within the caller's transaction, what it changed. */
  private async notify(client: pg.ClientBase, topics: readonly StoreTopic[]): Promise<void> {
    if (topics.length > 0) await client.query(notifyStatement(topics, this.nodeId));
  }

  // --- settings -------------------------------------------------------------------

  async getSetting(key: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [key]);
    return rows[0]?.value;
  }

  async insertSettingIfAbsent(key: string, value: string): Promise<boolean> {
    const result = await this.pool.query('INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING', [key, value]);
    return (result.rowCount ?? 0) > 0;
  }

  async getConfigVersion(): Promise<number> {
    return Number(await this.getSetting('config_version'));
  }

  /**
   * Runs a config write, bumps the config version and notifies, in one
   * transaction. The version row is locked until commit, so config writes
   * from all nodes queue up there; they are rare.
   */
  private async configChange<T>(write: (client: pg.ClientBase) => Promise<T>): Promise<T> {
    const result = await inTransaction(this.pool, async (client) => {
      const value = await write(client);
      await client.query(`UPDATE settings SET value = (value::bigint + 1)::text WHERE key = 'config_version'`);
      await this.notify(client, ['config']);
      return value;
    });
    this.emit('config');
    return result;
  }

  // --- sources and destinations ------------------------------------------------------

  async insertSource(source: SourceRecord): Promise<void> {
    await this.configChange((client) =>
      client.query(
        `INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [source.id, source.name, source.writeKey, sha256Hex(source.writeKey), source.enabled, source.createdAt, source.updatedAt],
      ),
    );
  }

  async listSources(): Promise<SourceRecord[]> {
    const { rows } = await this.pool.query<SourceRow>('SELECT * FROM sources ORDER BY created_at, id');
    return rows.map(toSource);
  }

  async getSource(id: string): Promise<SourceRecord | undefined> {
    const { rows } = await this.pool.query<SourceRow>('SELECT * FROM sources WHERE id = $1', [id]);
    return rows[0] === undefined ? undefined : toSource(rows[0]);
  }

  async updateSource(id: string, patch: SourcePatch, now: number): Promise<SourceRecord | undefined> {
    const row = await this.configChange(async (client) => {
      const { rows } = await client.query<SourceRow>(
        `UPDATE sources SET name = COALESCE($1, name), enabled = COALESCE($2, enabled), updated_at = $3
         WHERE id = $4 RETURNING *`,
        [patch.name ?? null, patch.enabled ?? null, now, id],
      );
      return rows[0];
    });
    return row === undefined ? undefined : toSource(row);
  }

  async deleteSource(id: string): Promise<boolean> {
    return this.configChange(async (client) => {
      const deleted = await client.query('DELETE FROM sources WHERE id = $1', [id]);
      if (deleted.rowCount === 0) return false;
      await client.query('DELETE FROM destinations WHERE source_id = $1', [id]);
      await client.query('DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE source_id = $1)', [id]);
      await client.query('DELETE FROM deliveries WHERE source_id = $1', [id]);
      await client.query('DELETE FROM messages WHERE source_id = $1', [id]);
      await client.query('DELETE FROM dedupe_keys WHERE source_id = $1', [id]);
      return true;
    });
  }

  async putDestination(destination: DestinationRecord): Promise<void> {
    await this.configChange((client) =>
      client.query(
        `INSERT INTO destinations (source_id, kind, enabled, settings, updated_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (source_id, kind) DO UPDATE SET
           enabled = excluded.enabled, settings = excluded.settings, updated_at = excluded.updated_at`,
        [destination.sourceId, destination.kind, destination.enabled, JSON.stringify(destination.settings), destination.updatedAt],
      ),
    );
  }

  async getDestination(sourceId: string, kind: DestinationKind): Promise<DestinationRecord | undefined> {
    const { rows } = await this.pool.query<DestinationRow>('SELECT * FROM destinations WHERE source_id = $1 AND kind = $2', [sourceId, kind]);
    return rows[0] === undefined ? undefined : toDestination(rows[0]);
  }

  async listDestinations(): Promise<DestinationRecord[]> {
    const { rows } = await this.pool.query<DestinationRow>('SELECT * FROM destinations');
    return rows.map(toDestination);
  }

  // --- ingest ------------------------------------------------------------------------

  async appendMessages(entries: readonly IngestEntry[], dedupeSince: number): Promise<AppendResult[]> {
    if (entries.length === 0) return [];
    const { results, deliveriesAdded } = await inTransaction(this.pool, async (client) => {
      const appended = await messages.appendMessages(client, entries, dedupeSince);
      await this.notify(client, appended.deliveriesAdded ? ['messages', 'deliveries'] : ['messages']);
      return appended;
    });
    this.emit('messages');
    if (deliveriesAdded) this.emit('deliveries');
    return results;
  }

  async listRecentMessages(sourceId: string, limit: number): Promise<StoredMessage[]> {
    return messages.listRecentMessages(this.pool, sourceId, limit);
  }

  // --- delivery ----------------------------------------------------------------------

  async claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]> {
    return deliveries.claimDeliveries(this.pool, request);
  }

  async finishDeliveries(outcomes: readonly DeliveryOutcome[]): Promise<void> {
    await deliveries.finishDeliveries(this.pool, outcomes);
  }

  async nextDeliveryDueAt(): Promise<number | undefined> {
    return deliveries.nextDeliveryDueAt(this.pool);
  }

  async listDeliveries(filter: DeliveryFilter): Promise<DeliveryRecord[]> {
    return deliveries.listDeliveries(this.pool, filter);
  }

  async getDelivery(id: number): Promise<DeliveryDetail | undefined> {
    return deliveries.getDelivery(this.pool, id);
  }

  async requeueFailedDeliveries(filter: RequeueFilter, now: number): Promise<number> {
    const count = await inTransaction(this.pool, async (client) => {
      const requeued = await deliveries.requeueFailedDeliveries(client, filter, now);
      if (requeued > 0) await this.notify(client, ['deliveries']);
      return requeued;
    });
    if (count > 0) this.emit('deliveries');
    return count;
  }

  // --- housekeeping ------------------------------------------------------------------

  /** Batch after batch, each its own short statements; other work runs between them. */
  async prune(before: number, dedupeBefore: number): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await messages.pruneBatch(this.pool, before, dedupeBefore);
      total += removed;
      if (removed === 0) return total;
    }
  }
}

/** A short reason; a refused connection to a host with several addresses is an AggregateError without a message. */
function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return error.message || (typeof code === 'string' ? code : error.name);
}

function toSource(row: SourceRow): SourceRecord {
  return {
    id: row.id,
    name: row.name,
    writeKey: row.write_key,
    enabled: row.enabled,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toDestination(row: DestinationRow): DestinationRecord {
  return {
    sourceId: row.source_id,
    kind: row.kind,
    enabled: row.enabled,
    settings: JSON.parse(row.settings) as unknown,
    updatedAt: row.updated_at,
  };
}
