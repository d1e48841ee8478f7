import type { MessageStatus } from '../domain/message.js';
import type { DestinationKind } from '../domain/routing.js';

/**
 * The storage contract every adapter (SQLite, PostgreSQL) fulfils.
 *
 * Glossary
 * - source: where messages come from; owns a write key and destinations.
 * - destination: where a source's messages go; today only `webhooks`.
 * - message: one stored call, whatever its status (the debugger reads these).
 * - delivery: the job of sending one accepted message to one destination.
 *   `pending` until it succeeds or gives up (`failed`); a failed one can be
 *   put back to `pending` by hand.
 * - attempt: one round of POSTs of a delivery, one row per receiver URL.
 * - lease: a worker's claim on a pending delivery until `leaseExpiresAt`;
 *   an expired lease (its worker died) makes the delivery claimable again.
 *
 * What a store owns: its connections (opened by the factory, closed by
 * {@link Store.close}), its schema (created and upgraded by
 * {@link Store.migrate}) and the atomicity of each method: every method that
 * writes commits all of its writes or none. What it does not own: validation
 * (callers pass valid records), ids and clocks (callers pass them), caching
 * and retry policy.
 *
 * Durability: when a write method's promise resolves, its writes are committed
 * to the level the store was opened with (`process` or `fsync`).
 *
 * Times are epoch milliseconds. Ids of messages and deliveries are numbers
 * that grow with insertion order.
 */
export interface Store {
  readonly capabilities: StoreCapabilities;

  /** Creates or upgrades the schema; safe to call from several processes at once. */
  migrate(): Promise<void>;
  /** Resolves when the store answers a trivial query; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;

  // --- settings and bootstrap ---------------------------------------------------
  getSetting(key: string): Promise<string | undefined>;
  /** Stores `value` unless `key` has one; resolves true when this call stored it. */
  insertSettingIfAbsent(key: string, value: string): Promise<boolean>;
  /**
   * A number that changes whenever sources or destinations change, from any
   * process; caches poll it to know when to reload.
   */
  getConfigVersion(): Promise<number>;

  // --- sources and destinations ----------------------------------------------------
  insertSource(source: SourceRecord): Promise<void>;
  listSources(): Promise<SourceRecord[]>;
  getSource(id: string): Promise<SourceRecord | undefined>;
  /** Resolves the updated source, or undefined when there is none with that id. */
  updateSource(id: string, patch: SourcePatch, now: number): Promise<SourceRecord | undefined>;
  /** Deletes the source with its destinations, messages and deliveries; resolves false when absent. */
  deleteSource(id: string): Promise<boolean>;
  putDestination(destination: DestinationRecord): Promise<void>;
  getDestination(sourceId: string, kind: DestinationKind): Promise<DestinationRecord | undefined>;
  listDestinations(): Promise<DestinationRecord[]>;

  // --- ingest ------------------------------------------------------------------------
  /**
   * Stores messages and the delivery jobs of the accepted ones in one commit.
   * De-duplicates: an `accepted` entry whose messageId was seen on the same
   * source since `dedupeSince` is stored as `duplicate` without jobs. Results
   * are in the order of `entries`.
   */
  appendMessages(entries: readonly IngestEntry[], dedupeSince: number): Promise<AppendResult[]>;
  /** The source's most recent messages, newest first. */
  listRecentMessages(sourceId: string, limit: number): Promise<StoredMessage[]>;

  // --- delivery ----------------------------------------------------------------------
  /**
   * Leases up to `limit` pending deliveries due at `now` whose lease is free or
   * expired, oldest due first, to `owner` until `now + leaseMs`.
   */
  claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]>;
  /**
   * Records what became of claimed deliveries, with their attempts, in one
   * commit. An outcome whose lease `owner` no longer holds the delivery is
   * ignored (another worker took it over), and so are its attempts.
   */
  finishDeliveries(outcomes: readonly DeliveryOutcome[]): Promise<void>;
  /** When the earliest pending delivery is due, or undefined when none is pending. */
  nextDeliveryDueAt(): Promise<number | undefined>;
  listDeliveries(filter: DeliveryFilter): Promise<DeliveryRecord[]>;
  getDelivery(id: number): Promise<DeliveryDetail | undefined>;
  /**
   * Puts failed deliveries back to pending, due at `now`, with a fresh retry
   * window. Resolves how many were requeued.
   */
  requeueFailedDeliveries(filter: RequeueFilter, now: number): Promise<number>;

  // --- change notification ------------------------------------------------------------
  /**
   * Calls `listener` when something changed that a poller would otherwise see
   * only later: deliveries added or requeued, sources or destinations changed,
   * messages appended. Adapters shared by several nodes pass on other nodes'
   * changes too. Returns the function that unsubscribes.
   */
  subscribe(listener: (topic: StoreTopic) => void): () => void;

  // --- housekeeping ------------------------------------------------------------------
  /**
   * Deletes, in small batches, messages received before `before` that no
   * pending delivery needs, finished deliveries created before it, and expired
   * de-duplication keys. Resolves how many rows went.
   */
  prune(before: number, dedupeBefore: number): Promise<number>;
}

export type StoreTopic = 'deliveries' | 'config' | 'messages';

/** What an adapter can and cannot do; tests name a capability when they skip. */
export interface StoreCapabilities {
  readonly name: 'sqlite' | 'postgres';
  /** Several `serve` processes may share the store. */
  readonly multiNode: boolean;
}

export interface SourceRecord {
  readonly id: string;
  readonly name: string;
  readonly writeKey: string;
  readonly enabled: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface SourcePatch {
  readonly name?: string;
  readonly enabled?: boolean;
}

export interface DestinationRecord {
  readonly sourceId: string;
  readonly kind: DestinationKind;
  readonly enabled: boolean;
  /** Destination-specific settings, validated by the caller. */
  readonly settings: unknown;
  readonly updatedAt: number;
}

export interface IngestEntry {
  readonly sourceId: string;
  readonly status: Exclude<MessageStatus, 'duplicate'>;
  readonly reason?: string | undefined;
  /** The call type; for a rejected entry, whatever type the client gave (if any). */
  readonly type: string | undefined;
  readonly messageId: string | undefined;
  readonly userId: string | undefined;
  readonly receivedAt: number;
  /** The message as JSON text, exactly as it will be delivered. */
  readonly body: string;
  /** Destinations to create delivery jobs for, when the entry is stored as accepted. */
  readonly destinations: readonly DestinationKind[];
}

export interface AppendResult {
  readonly seq: number;
  readonly status: MessageStatus;
}

export interface StoredMessage {
  readonly seq: number;
  readonly sourceId: string;
  readonly status: MessageStatus;
  readonly reason: string | undefined;
  readonly type: string | undefined;
  readonly messageId: string | undefined;
  readonly userId: string | undefined;
  readonly receivedAt: number;
  readonly body: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface ClaimRequest {
  readonly owner: string;
  readonly limit: number;
  readonly leaseMs: number;
  readonly now: number;
}

export interface ClaimedDelivery {
  readonly id: number;
  readonly sourceId: string;
  readonly destination: DestinationKind;
  readonly messageSeq: number;
  /** The stored message JSON. */
  readonly body: string;
  readonly attemptCount: number;
  /** When the first attempt was made, which starts the retry window; undefined before it. */
  readonly firstAttemptAt: number | undefined;
  /** Receivers left to retry after earlier attempts; undefined means every receiver. */
  readonly retryUrls: readonly string[] | undefined;
  readonly createdAt: number;
}

export interface AttemptRecord {
  readonly at: number;
  readonly url: string;
  readonly statusCode?: number | undefined;
  readonly error?: string | undefined;
  readonly durationMs: number;
}

/**
 * - succeeded / failed: final (failed can be requeued by hand).
 * - retry: pending again, due at `nextAttemptAt`, only for `retryUrls`.
 * - deferred: nothing was sent (e.g. a circuit breaker held it); pending again
 *   at `nextAttemptAt`, counting no attempt.
 */
export type DeliveryOutcome =
  | {
      readonly kind: 'succeeded' | 'failed';
      readonly id: number;
      readonly owner: string;
      readonly at: number;
      readonly firstAttemptAt: number;
      readonly attempts: readonly AttemptRecord[];
      readonly lastError?: string | undefined;
    }
  | {
      readonly kind: 'retry';
      readonly id: number;
      readonly owner: string;
      readonly at: number;
      readonly firstAttemptAt: number;
      readonly attempts: readonly AttemptRecord[];
      readonly nextAttemptAt: number;
      readonly retryUrls: readonly string[];
      readonly lastError?: string | undefined;
    }
  | {
      readonly kind: 'deferred';
      readonly id: number;
      readonly owner: string;
      readonly at: number;
      readonly nextAttemptAt: number;
    };

export interface DeliveryFilter {
  readonly sourceId?: string | undefined;
  readonly status?: DeliveryStatus | undefined;
  readonly limit: number;
  /** Only deliveries with an id below this one (pagination, newest first). */
  readonly beforeId?: number | undefined;
}

export interface RequeueFilter {
  readonly id?: number | undefined;
  readonly sourceId?: string | undefined;
  /** Only deliveries that failed at or after this time. */
  readonly since?: number | undefined;
}

export interface DeliveryRecord {
  readonly id: number;
  readonly sourceId: string;
  readonly destination: DestinationKind;
  readonly messageSeq: number;
  readonly messageId: string | undefined;
  readonly status: DeliveryStatus;
  readonly attemptCount: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly nextAttemptAt: number | undefined;
  readonly firstAttemptAt: number | undefined;
  readonly lastError: string | undefined;
}

export interface DeliveryDetail extends DeliveryRecord {
  readonly attempts: readonly AttemptRecord[];
}
