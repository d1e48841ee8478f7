import type { DestinationKind } from '../domain/routing.js';
import type { TrafficCount } from '../domain/traffic.js';
import type { TrackingPlanStore } from './tracking-plan-records.js';
import type { ObservationStore } from './observation-records.js';
import type { AppendResult, ClaimRequest, NewRawRequest, ProcessingOptions, RawBacklog, RawProcessed, RawRequest, ClaimedDelivery, DeliveryDetail, DeliveryFilter, DeliveryOutcome, DeliveryRecord, DestinationRecord, IngestEntry, NewRegulation, NewReplay, ReplayLimits, ReplayRange, ReplayRefusal, RegulationDetail, RegulationFilter, RegulationRecord, RegulationSourcePage, RegulationStepKey, RegulationStepRun, ReplayPage, ReplayRecord, RequeueFilter, SourcePatch, SourceRecord, StoredMessage, SuppressionChange, SuppressionRecord } from './records.js';
import type { TransformationStore } from './transformation-records.js';
import type { FunctionStore } from './function-records.js';
import type { ComputationKind, ComputationMember, ComputationPatch, ComputationRecord, EngageBatch, ProfileRecord } from './engage-records.js';

export type * from './records.js';
export type * from './engage-records.js';
export type * from './transformation-records.js';
export type * from './function-records.js';
export type * from './tracking-plan-records.js';
export type * from './observation-records.js';

/** See {@link ProcessingOptions.ordered}: the batch rolled back; process it again with `ordered: true`. */
export class ProcessingLockNeeded extends Error {
  constructor() {
    super('the batch links ordered deliveries, which needs the processing lock');
  }
}

/**
 * The storage contract every adapter (SQLite, PostgreSQL) fulfils.
 *
 * Glossary
 * - source: where messages come from; owns a write key and destinations.
 * - destination: where a source's messages go: its `webhooks` destination,
 *   and up to five function destinations (`deliveries.destination` is
 *   `webhooks` or `function:<id>`).
 * - message: one stored call, whatever its status (the debugger reads these).
 * - delivery: the job of sending one accepted message to one destination.
 *   `pending` until it succeeds or gives up (`failed`); a failed one can be
 *   put back to `pending` by hand.
 * - attempt: one round of POSTs of a delivery, one row per receiver URL.
 * - lease: a worker's claim on a pending delivery until `leaseExpiresAt`;
 *   an expired lease (its worker died) makes the delivery claimable again.
 * - regulation: a deletion or suppression request for some users (its
 *   subjects). A deleting one has a step per affected source: a
 *   `PENDING` row until that source's messages are erased and its `delete`
 *   messages stored, in one transaction.
 * - suppression: a user whose messages ingest stores as `suppressed` and
 *   routes nowhere, on one source or on every source.
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
 *
 * Roles: `Store` is the sum of one interface per part of the service, so that
 * each wing depends only on what it uses: {@link ConfigStore} (settings,
 * sources, destinations), {@link IngestStore}, {@link DeliveryQueue},
 * {@link RegulationStore}, {@link ReplayStore}, {@link EngageStore},
 * {@link TrafficStore}, {@link ChangeFeed} and {@link RetentionStore}. The
 * records they take and give are in `records.ts` and `engage-records.ts`
 * (re-exported here).
 *
 * Capabilities: what differs between adapters is named in
 * {@link StoreCapabilities}, never left to an optional method; a method an
 * adapter has no use for still exists and does nothing (see
 * {@link IngestStore.prepareIngest}, {@link DeliveryQueue.releaseLeases}).
 */
export interface Store
  extends ConfigStore,
    IngestStore,
    DeliveryQueue,
    RegulationStore,
    ReplayStore,
    EngageStore,
    TransformationStore,
    FunctionStore,
    TrafficStore,
    ChangeFeed,
    RetentionStore,
    TrackingPlanStore,
    ObservationStore {
  readonly capabilities: StoreCapabilities;

  /** Creates or upgrades the schema; safe to call from several processes at once. */
  migrate(): Promise<void>;
  /** Resolves when the store answers a trivial query; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Settings, the config version, sources and destinations: the admin API's and `SourceDirectory`'s part. */
export interface ConfigStore {
  // --- settings and bootstrap ---------------------------------------------------
  getSetting(key: string): Promise<string | undefined>;
  /** Stores `value` unless `key` has one; resolves true when this call stored it. */
  insertSettingIfAbsent(key: string, value: string): Promise<boolean>;
  /** Stores a setting, replacing its value. */
  putSetting(key: string, value: string): Promise<void>;
  /**
   * A number that changes whenever sources, destinations or suppressions
   * change, from any process; caches poll it to know when to reload.
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
  /** Removes a destination (its pending deliveries then fail as "no destination any more"); resolves false when absent. */
  deleteDestination(sourceId: string, kind: DestinationKind): Promise<boolean>;
  getDestination(sourceId: string, kind: DestinationKind): Promise<DestinationRecord | undefined>;
  listDestinations(): Promise<DestinationRecord[]>;
}

/** What ingest writes, and the per-source reads of the debugger. */
export interface IngestStore {
  // --- ingest ------------------------------------------------------------------------
  /**
   * Loads what ingest's hot path needs before the first request, so that the
   * first append does not pay for it while others wait. `serve` calls it
   * once, before it listens, with the de-duplication window's start. The
   * SQLite store builds its in-memory de-duplication index here
   * (`capabilities.preparesIngest`); a store with nothing to load resolves
   * at once.
   */
  prepareIngest(dedupeSince: number): Promise<void>;
  /**
   * Stores messages and the delivery jobs of the accepted ones in one commit.
   * De-duplicates: an `accepted` entry whose messageId was accepted on the
   * same source since `dedupeSince` is stored as `duplicate` without jobs.
   * Whether a sighting whose message a deletion request has since erased
   * still counts is the adapter's choice (PostgreSQL: it does; SQLite: it
   * does not, its index is derived from the stored messages). Results are in
   * the order of `entries`.
   */
  appendMessages(entries: readonly IngestEntry[], dedupeSince: number): Promise<AppendResult[]>;
  /**
   * Stores raw Tracking API requests, one row each, in one commit: what
   * ingest does before its 200 (the processing stage makes messages of them
   * later with {@link processRawRequests}). Notifies `raw`.
   */
  appendRawRequests(requests: readonly NewRawRequest[]): Promise<void>;
  /**
   * Processes the oldest unprocessed raw requests in one commit, or nothing:
   * takes up to `maxRequests` of them in seq order (on a multi-node store,
   * those no other node is processing: a row is processed by one node only,
   * e.g. `FOR UPDATE SKIP LOCKED`), fewer when their messages would pass
   * `maxMessages` (never none), hands them to `build`, stores the entries it
   * returns for each as {@link appendMessages} does (de-duplication, delivery
   * jobs, traffic counts), adds the entries' `shape` and `violations` to the
   * observed schema and violation counts ({@link ObservationStore}: added up
   * per batch, capped, one upsert per table) and deletes the raw rows, all in
   * one transaction.
   * `build` must be pure: a store may call it before its transaction (the
   * embedded one does, so that the write lock is not held while it runs),
   * and again for the rows as they stand once locked, when some went in
   * between (a deleted source's). When `build` throws, nothing is written
   * and the call rejects with its error. Notifies `messages`, and
   * `deliveries` when it created any.
   */
  processRawRequests(
    limits: { readonly maxRequests: number; readonly maxMessages: number },
    build: (requests: readonly RawRequest[]) => ReadonlyArray<readonly IngestEntry[]>,
    dedupeSince: number,
    options?: ProcessingOptions,
  ): Promise<RawProcessed>;
  /** How many raw requests (and messages in them) wait for processing. */
  rawBacklog(): Promise<RawBacklog>;
  /**
   * The highest `seq` of the raw requests not yet processed, 0 when there
   * are none. Every request acknowledged before this call has a seq no
   * higher, or is processed already: its row committed before the call
   * began, and seqs are never handed out twice (not even after the table
   * empties). Compare seqs, never `receivedAt`: on PostgreSQL that comes
   * from the clock of whichever node took the request.
   */
  highestRawSeq(): Promise<number>;
  /** Whether a raw request with `seq` at most `seq` is still unprocessed (a deletion waits for it). */
  hasRawRequestsUpTo(seq: number): Promise<boolean>;
  /** The source's most recent messages, newest first. */
  listRecentMessages(sourceId: string, limit: number): Promise<StoredMessage[]>;
  /**
   * The source's messages with `afterSeq < seq <= uptoSeq`, oldest first
   * (seq ascending), at most `limit`. The debugger stream and replays page
   * with it, passing their cursor and {@link settledMessageSeq} as `uptoSeq`:
   * on a multi-node store a transaction can commit after one holding a
   * higher seq, and a reader whose cursor had passed it would miss it.
   */
  listMessagesAfter(sourceId: string, afterSeq: number, limit: number, uptoSeq?: number): Promise<StoredMessage[]>;
  /**
   * How many of the source's messages have `afterSeq < seq < beforeSeq`
   * (no upper bound when `beforeSeq` is undefined). The debugger stream uses
   * it to tell a slow reader how many messages it skipped.
   */
  countMessages(sourceId: string, afterSeq: number, beforeSeq?: number): Promise<number>;
  /**
   * The highest seq of any stored message, 0 when there is none. Every
   * message committed before this call has a seq no higher (a replay reads
   * up to it once its range is complete).
   */
  highestMessageSeq(): Promise<number>;
}

/** The delivery jobs: what the worker claims and records, what the admin lists and requeues. */
export interface DeliveryQueue {
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
   * A delivery that ends (succeeded or failed) makes the delivery waiting
   * behind it (ordered delivery, replays) due in the same commit; resolves
   * how many it made due.
   */
  finishDeliveries(outcomes: readonly DeliveryOutcome[]): Promise<number | void>;
  /**
   * Makes pending deliveries leased by workers that are gone claimable at
   * `now` instead of when their leases expire; the leases of `keepOwner`
   * (the calling worker) stay. A worker calls it once as it starts, so a
   * restart after a crash resumes at once. Only a single-node store
   * (`capabilities.multiNode` false) can know that no other worker is alive,
   * and it releases every other lease (`capabilities.releasesLeases`);
   * multi-node stores cannot tell a dead node from a live one, release
   * nothing and resolve 0: their leases expire by themselves. Resolves how
   * many leases were released.
   */
  releaseLeases(keepOwner: string, now: number): Promise<number>;
  /** When the earliest pending delivery is due, or undefined when none is pending. */
  nextDeliveryDueAt(): Promise<number | undefined>;
  listDeliveries(filter: DeliveryFilter): Promise<DeliveryRecord[]>;
  getDelivery(id: number): Promise<DeliveryDetail | undefined>;
  /**
   * Puts failed deliveries back to pending, due at `now`, with a fresh retry
   * window. Resolves how many were requeued.
   */
  requeueFailedDeliveries(filter: RequeueFilter, now: number): Promise<number>;
  /** Retry now: a pending delivery waiting for its next attempt becomes due at `now`. Resolves whether it did. */
  makeDeliveryDueNow(id: number, now: number): Promise<boolean>;
}

/** Deletion and suppression requests. */
export interface RegulationStore {
  // --- regulations: deletion and suppression requests ---------------------------------
  // What each regulation type does is fixed by `regulationEffects` in
  // src/domain/regulation.ts; adapters import it rather than repeat it.

  /**
   * Stores a request with one row per affected source (`stepSourceIds`),
   * and applies its suppression effect, all in one commit:
   * - A deleting type (`regulationEffects(type).deletes`): its source rows are
   *   `PENDING` and it is `INITIALIZED`; with no affected source at all it is
   *   `FINISHED` at once.
   * - Any other type: its source rows are `FINISHED` and so is it.
   * - Suppression `add`: each subject becomes suppressed on each of
   *   `sourceIds`, or on every source (present and future) when `sourceIds` is
   *   undefined. A suppression that already exists for the same user and the
   *   same source (or "every source") now names this regulation.
   * - Suppression `remove`: deletes the subjects' suppressions for each of
   *   `sourceIds`, or every suppression of the subjects when `sourceIds` is
   *   undefined. Naming sources does not lift a suppression for every source.
   * - When the type has a suppression effect, the same commit bumps the config
   *   version (so the caches of every node reload) and the store notifies
   *   `config`.
   * `createdAt` is also the request's and its source rows' `updatedAt`.
   * - In the same commit, records {@link highestRawSeq} as the request's
   *   `rawSeqMark`, read by a statement that starts after the request came
   *   in: its deletion steps wait until no raw request up to that mark is
   *   left (every request acknowledged before this one).
   * Rejects, writing nothing, when a request with this id exists.
   */
  createRegulation(regulation: NewRegulation): Promise<void>;
  /**
   * Requests newest first (`createdAt`, then id, both descending), only
   * those of `status` when given, at most `limit`. Without their subject ids,
   * which can be thousands a request: {@link getRegulation} has them. Each
   * with its first `sources` source rows (by source id) and `sourceCounts`
   * (all of them, counted), read without reading the other rows: a request
   * can have a row per source, and there can be thousands of sources.
   */
  listRegulations(filter: RegulationFilter): Promise<RegulationRecord[]>;
  /**
   * One request with its subject ids (in the order stored), or undefined;
   * with the source rows of `sources` (all of them when omitted).
   */
  getRegulation(id: string, sources?: RegulationSourcePage): Promise<RegulationDetail | undefined>;
  /** Up to `limit` `PENDING` source rows, those of the oldest requests (createdAt, id) first. */
  listPendingRegulationSteps(limit: number): Promise<RegulationStepKey[]>;
  /**
   * Runs one step (a request on one source) in one commit, or does nothing:
   * 1. Claims it: the source row goes from `PENDING` to `FINISHED` (with
   *    `updatedAt = at`). When the row is not `PENDING` (another node ran it,
   *    it failed, or there is no such row) nothing is written and this
   *    resolves false. Exclusive: of several calls for the same step at once,
   *    from any number of nodes, exactly one resolves true; the claim is the
   *    first write of the transaction, e.g. `UPDATE … WHERE status =
   *    'PENDING' RETURNING`, so a concurrent one waits and then finds nothing.
   * 2. Erases the source's messages whose `userId` is one of `eraseUserIds`,
   *    except messages of type `delete`, together with their deliveries
   *    (whatever their status; a worker's later outcome for one is ignored)
   *    and those deliveries' attempts.
   * 3. Stores `messages` with their given status and no de-duplication; an
   *    `accepted` one gets a pending delivery to each of its `destinations`,
   *    due at its `receivedAt`, as {@link IngestStore.appendMessages} does.
   * 4. Sets the request's status: `RUNNING` while some of its source rows are
   *    `PENDING`, otherwise `FAILED` if any failed, else `FINISHED`;
   *    `updatedAt = at`. Other steps of the same request may commit at the
   *    same time on other nodes and the status must still come out right,
   *    e.g. by locking the request's row (`SELECT … FOR UPDATE`) before
   *    counting its source rows.
   * A crash before the commit leaves the step `PENDING`, with nothing of it
   * written. Notifies `messages`, and `deliveries` when it created any.
   */
  runRegulationStep(step: RegulationStepRun): Promise<boolean>;
  /**
   * Marks a `PENDING` source row `FAILED` with `error`, and sets the request's
   * status as {@link runRegulationStep} does, in one commit. Resolves false,
   * writing nothing, when the row is not `PENDING`.
   */
  failRegulationStep(step: RegulationStepKey, error: string, at: number): Promise<boolean>;
  /** Every suppression in force, in no particular order. */
  listSuppressions(): Promise<SuppressionRecord[]>;
  /**
   * How many suppressions in force (rows, as {@link listSuppressions} lists
   * them) these users have, counted no further than `atMost`: the rows an
   * `UNSUPPRESS` of them without `sourceIds` would lift, which the admin
   * bounds. Reads at most `atMost` rows, whatever the users have.
   */
  countSuppressionsInForce(userIds: readonly string[], atMost: number): Promise<number>;
  /**
   * The suppression rows that changed after `afterSeq` (0: from the first),
   * in `seq` order, at most `limit`: those in force and those lifted since
   * (a lift keeps the row, marked `lifted`, with a new seq), so that a node
   * holding the suppressions in memory reads only what changed since it last
   * read, removals included. Every row {@link createRegulation} writes gets a
   * seq higher than any committed before; and once a reader has seen a seq,
   * every lower one is committed (on PostgreSQL the writes queue on the config
   * version's row lock, so seqs are taken in commit order): reading on from
   * the highest seq seen misses nothing.
   */
  listSuppressionChanges(afterSeq: number, limit: number): Promise<SuppressionChange[]>;
}

/** Replays. */
export interface ReplayStore {
  // --- replays: re-delivering a time range of stored messages --------------------------
  /**
   * Stores a new `running` replay with no counts, its cursor just before the
   * first seq that can hold a message of its range: the lowest seq of the
   * source's messages received in `[from, to)` stored now, or the highest
   * seq settled now if that is lower (a message committed later has a higher
   * seq), so the runner never reads the history before its range. With
   * `limits`, refuses (writing nothing) when the source or the store already
   * has that many running; two nodes creating at once queue, so the limit
   * holds across nodes.
   */
  createReplay(replay: NewReplay, limits?: ReplayLimits): Promise<ReplayRefusal | undefined>;
  /**
   * The lowest and highest seq among the source's messages stored now with
   * `from <= receivedAt < to` (undefined: none), read by an index on
   * receivedAt: the work is that of the range's messages, not the source's.
   */
  replayRangeSeqs(sourceId: string, from: number, to: number): Promise<ReplayRange | undefined>;
  /** The source's replays, newest first, with their counts. */
  listReplays(sourceId: string, limit: number): Promise<ReplayRecord[]>;
  getReplay(id: string): Promise<ReplayRecord | undefined>;
  /** Every `running` replay, oldest first. */
  listRunningReplays(): Promise<ReplayRecord[]>;
  /** How many of the replay's deliveries are pending (the runner keeps this bounded). */
  countPendingReplayDeliveries(replayId: string): Promise<number>;
  /**
   * Queues one page of a running replay, in one commit: moves its cursor from
   * `fromCursor` to `toCursor`, adds `messageSeqs.length` to `queued`, and
   * creates one pending delivery per seq (due at `at`, marked with the
   * replay's id, for `receivers` only when given). Exclusive: resolves false,
   * writing nothing, when the replay is no longer running or its cursor is no
   * longer `fromCursor` (another node queued that page). Notifies `deliveries`.
   */
  queueReplayPage(page: ReplayPage): Promise<boolean>;
  /**
   * Ends a replay: `done` (only from `running`), or `cancelled` (only from
   * `running`), which also deletes its pending deliveries so nothing more is
   * sent. Resolves the replay as it is now, or undefined when there is none.
   */
  endReplay(id: string, status: 'done' | 'cancelled', at: number): Promise<ReplayRecord | undefined>;
}

/** Engage: computations, profiles, the evaluator's stream cursor and lease. */
/** See {@link EngageStore.settledMessageSeq}. */
export interface SettledSeqRead {
  readonly seq: number;
  readonly settling: boolean;
}

export interface EngageStore {
  // --- engage: computed traits, audiences and profiles ---------------------------------
  // One evaluator at a time walks the message stream (it holds the Engage
  // lease); everything it writes for a message, a backfill page or an expiry
  // goes in one {@link commitEngage}, so a crash leaves all of it or none.

  /** Stores a new computation; resolves false, writing nothing, when its key is taken. */
  insertComputation(computation: ComputationRecord): Promise<boolean>;
  /**
   * Computations of `kind` (all when undefined), oldest first, with their
   * `size` (audiences: their members) unless `sizes` is false (counting
   * members reads every member row).
   */
  listComputations(kind?: ComputationKind, sizes?: boolean): Promise<ComputationRecord[]>;
  getComputation(id: string): Promise<ComputationRecord | undefined>;
  /**
   * Changes name, definition, destinations; a new definition also sets
   * status `computing` and bumps `version` (the evaluator recomputes it).
   * Resolves the computation as it is now, or undefined when absent.
   */
  updateComputation(id: string, patch: ComputationPatch, at: number): Promise<ComputationRecord | undefined>;
  /**
   * Deletes a computation and its member rows; resolves false when absent.
   * (A trait's values stay on the profiles until each is next written: they
   * are read only for the computations that exist.)
   */
  deleteComputation(id: string): Promise<boolean>;
  /** An audience's current members in join order (`since`, then profile id), after `after`, the previous page's last (a trait has none). */
  listComputationMembers(computationId: string, limit: number, after?: Pick<ComputationMember, 'since' | 'profileId'>): Promise<ComputationMember[]>;

  /** The profile ids of those of `identifiers` that belong to a profile. */
  findProfileIds(identifiers: readonly string[]): Promise<Map<string, string>>;
  /** The profiles with these ids that exist, in no particular order. */
  getProfiles(ids: readonly string[]): Promise<ProfileRecord[]>;
  /** Ids of profiles whose `nextExpiry` is at or before `now`, soonest first. */
  listExpiredProfileIds(now: number, limit: number): Promise<string[]>;
  /** Profile ids in ascending order after `afterId` (every profile when paging from ''). */
  listProfileIds(afterId: string, limit: number): Promise<string[]>;
  /** Messages of any source with `afterSeq < seq <= uptoSeq` (no upper bound when undefined), oldest first. */
  listMessagesSince(afterSeq: number, limit: number, uptoSeq?: number): Promise<StoredMessage[]>;
  /**
   * How far the stream can be read in seq order without missing a message:
   * every seq at or below `seq` is committed or never will be. Where several
   * transactions insert messages at once, a seq can commit after a higher
   * one; `settling` is true while transactions running now may settle a
   * higher seq (look again soon). The embedded store: no bound.
   */
  settledMessageSeq(): Promise<SettledSeqRead>;
  /** The stored messages with these seqs that still exist, newest first. */
  getMessagesBySeq(seqs: readonly number[]): Promise<StoredMessage[]>;
  /** The last message seq the evaluator has applied (0 at first). */
  getEngageCursor(): Promise<number>;
  /**
   * The cursor and how many regulation steps have run (`erasures`), read
   * together before a page of the stream: the page's commit names both and
   * is refused when a step ran meanwhile, since the page may hold messages
   * of a user the step erased (a profile made of them would outlive the
   * erasure, and its syncs follow the `delete`). Every regulation step
   * counts, whatever users it erases: steps are rare, and a refused commit
   * is only redone.
   */
  getEngageStreamPosition(): Promise<{ readonly cursor: number; readonly erasures: number }>;
  /**
   * The oldest stored message past the evaluator's cursor (not applied yet)
   * and when it was received; undefined when the evaluator has applied every
   * stored message. What `switchyard_engage_lag_seconds` reads.
   */
  oldestUnevaluatedMessage(): Promise<{ seq: number; receivedAt: number } | undefined>;
  /**
   * Takes or renews the Engage lease for `owner` until `now + ttlMs`; resolves
   * false when another owner holds an unexpired lease. A conditional UPDATE,
   * so of several nodes asking at once exactly one gets it.
   */
  claimEngageLease(owner: string, now: number, ttlMs: number): Promise<boolean>;
  /** Gives the lease up (a stopping node), when `owner` holds it. */
  releaseEngageLease(owner: string): Promise<void>;
  /**
   * At start, on a single-node store (`capabilities.releasesLeases`): frees
   * the Engage lease when an owner other than `keepOwner` holds it (a process
   * killed with SIGKILL, a stage thread that died), so Engage resumes at once
   * instead of when that lease runs out. Resolves whether it freed one; on a
   * shared store it frees nothing (another node may be alive).
   */
  releaseStaleEngageLease(keepOwner: string): Promise<boolean>;
  /**
   * Writes one step of the evaluator in one commit, or nothing: resolves
   * false, writing nothing, when the cursor is no longer `cursor.from`,
   * a profile's version is not `expectedVersion` (0: it must not exist) or a
   * computation marked live is no longer at that version. A concurrent
   * commit touching the same profile waits for the first one's row lock and
   * then finds the version changed, so no update is lost. In order: deletes
   * `deletedProfiles` (rows, identifiers, member rows), writes `profiles`
   * (version + 1, with their computed trait values) and their identifiers
   * (moving them from any other profile) and membership changes, stores `messages` with a pending delivery to each of
   * their destinations (no de-duplication), moves the cursor, marks
   * `computationsLive`. Notifies `messages`, and `deliveries` when it queued any.
   * A message with `engageSync` is a sync, chained as src/store/engage-sync-chain.ts
   * says (older pending ones of its chain dropped, parked behind one in
   * flight); at most one per chain in a batch. Fails the commit (resolves
   * false) when a computation whose members or syncs it writes (see
   * `EngageBatch.computations`) no longer exists or changed version.
   */
  commitEngage(batch: EngageBatch): Promise<boolean>;
  /**
   * Releases parked Engage syncs (up to `limit`) whose chain has nothing in
   * flight any more, dropping an older one waiting for a retry; resolves how
   * many it released and how many of those it looked at stay parked.
   * Notifies `deliveries` when it released any.
   */
  releaseEngageSyncs(now: number, limit: number): Promise<{ released: number; parked: number }>;
}

/** The per-minute traffic counters. */
export interface TrafficStore {
  // --- traffic counters: the console's overview charts --------------------------------
  /**
   * The per-minute counters from the minute holding `since` on, every node's
   * together, ordered by minute: `messages` by the status ingest stored
   * (counted in {@link IngestStore.appendMessages}' commit, at each message's
   * `receivedAt`; the `delete` messages of regulations are not received and
   * not counted) and `deliveries` by round outcome (`succeeded`, `failed`,
   * `retried`; counted in {@link DeliveryQueue.finishDeliveries}' commit, at the outcome's
   * `at`, only for outcomes that applied; deferred rounds are not counted).
   * {@link RetentionStore.prune} drops counters older than its `before`.
   */
  trafficSince(since: number): Promise<TrafficCount[]>;
}

/** Change notifications across threads and nodes. */
export interface ChangeFeed {
  // --- change notification ------------------------------------------------------------
  /**
   * Calls `listener` when something changed that a poller would otherwise see
   * only later: deliveries added or requeued, sources or destinations changed,
   * messages appended. Adapters shared by several nodes pass on other nodes'
   * changes too. Returns the function that unsubscribes.
   */
  subscribe(listener: (topic: StoreTopic) => void): () => void;
}

/** Retention: the pruner's part. */
export interface RetentionStore {
  // --- housekeeping ------------------------------------------------------------------
  /**
   * Deletes, in small batches, messages received before `before` that no
   * pending delivery needs, finished deliveries created before it, and
   * de-duplication keys older than `dedupeBefore` where the adapter keeps
   * them in a table. Resolves how many rows went.
   */
  prune(before: number, dedupeBefore: number): Promise<number>;
}

export type StoreTopic = 'deliveries' | 'config' | 'messages' | 'raw';

/**
 * What an adapter can and cannot do; tests name a capability when they skip.
 *
 * | capability       | sqlite | postgres |
 * |------------------|--------|----------|
 * | `multiNode`      | no     | yes      |
 * | `preparesIngest` | yes    | no       |
 * | `releasesLeases` | yes    | no       |
 */
export interface StoreCapabilities {
  readonly name: 'sqlite' | 'postgres';
  /** Several `serve` processes may share the store. */
  readonly multiNode: boolean;
  /** {@link IngestStore.prepareIngest} loads something (SQLite: the de-duplication index); otherwise it resolves at once. */
  readonly preparesIngest: boolean;
  /** {@link DeliveryQueue.releaseLeases} frees the leases of workers that are gone (single-node stores only); otherwise it resolves 0. */
  readonly releasesLeases: boolean;
}
