import { EventEmitter } from 'node:events';
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BroadcastChannel, isMainThread } from 'node:worker_threads';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { regulationEffects } from '../../domain/regulation.js';
import { type TrafficCount, minuteOf } from '../../domain/traffic.js';
import type { DestinationKind } from '../../domain/routing.js';
import type {
  AppendResult,
  ClaimRequest,
  ComputationKind,
  ComputationMember,
  ComputationPatch,
  ComputationRecord,
  EngageBatch,
  ProfileRecord,
  RawBacklog,
  RawProcessed,
  RawRequest,
  ClaimedDelivery,
  DeliveryDetail,
  DeliveryFilter,
  DeliveryOutcome,
  DeliveryRecord,
  DestinationRecord,
  IngestEntry,
  NewRawRequest,
  NewRegulation,
  NewReplay,
  ReplayLimits,
  ReplayRange,
  ReplayRefusal,
  RegulationDetail,
  RegulationFilter,
  RegulationRecord,
  RegulationSourcePage,
  RegulationStepKey,
  RegulationStepRun,
  ReplayPage,
  ReplayRecord,
  RequeueFilter,
  SettledSeqRead,
  SourcePatch,
  SourceRecord,
  Store,
  StoreCapabilities,
  StoreTopic,
  StoredMessage,
  SuppressionChange,
  SuppressionRecord,
} from '../store.js';
import { DeliveryQueries } from './delivery-queries.js';
import { EngageQueries } from './engage-queries.js';
import { MessageQueries } from './message-queries.js';
import { RawQueries } from './raw-queries.js';
import { observedAsBuilt } from '../observation-records.js';
import { ObservationQueries } from './observation-queries.js';
import type { ObservedEventRow, ObservedPathRow, ObservedPosition } from '../../domain/observed-schema.js';
import type { ViolationRows } from '../../domain/plan-violation-counts.js';
import { TrafficQueries } from './traffic-queries.js';
import { migrate } from './migrations.js';
import { makePrivateDir, makePrivateFile } from './private-files.js';
import { RegulationQueries } from './regulation-queries.js';
import { ReplayQueries } from './replay-queries.js';
import { TransformationQueries } from './transformation-queries.js';
import * as functions from './function-queries.js';
import type { FunctionCodeRecord, FunctionDestinationPatch, FunctionDestinationRecord, FunctionWriteRefusal, NewFunctionDestination } from '../function-records.js';
import type { TransformResult, TransformationRecord, TransformationVersionRecord, TransformingDelivery } from '../transformation-records.js';
import { WriteLock } from './write-lock.js';
import * as sources from './source-queries.js';
import * as trackingPlans from './tracking-plan-queries.js';
import type { TrackingPlanRecord } from '../tracking-plan-records.js';

export interface SqliteStoreOptions {
  /** Folder of the database file; created when missing. `:memory:` for a private in-memory store. */
  readonly dataDir: string;
  /** `fsync` makes every commit reach the disk before it resolves (survives power loss). */
  readonly durability: 'process' | 'fsync';
}

/**
 * The embedded store: one SQLite file in WAL mode, used by one `serve`
 * process (the CLI may open it beside the server). better-sqlite3 is
 * synchronous, so each method runs to completion within one event-loop turn;
 * callers group writes (see ingest's group commit) to share commits.
 *
 * `serve` opens the file twice, ingest on the main thread and the background
 * stages on a worker thread. Every writing transaction therefore begins
 * IMMEDIATE: a deferred one that reads first and then writes fails at once
 * with SQLITE_BUSY when the other connection committed in between, while
 * IMMEDIATE takes the write lock up front and waits under `busy_timeout`.
 */
/** The store's file inside the data folder. */
export const SQLITE_FILE = 'switchyard.sqlite';
/** How often the stage thread's connection checkpoints the WAL. */
const CHECKPOINT_EVERY_MS = 200;
/** Index keys of a replay's range read per statement (a few milliseconds each). */
const REPLAY_RANGE_CHUNK = 10_000;

export class SqliteStore implements Store {
  readonly capabilities: StoreCapabilities = { name: 'sqlite', multiNode: false, preparesIngest: true, releasesLeases: true };
  private readonly events = new EventEmitter();
  private messages!: MessageQueries;
  private deliveries!: DeliveryQueries;
  private regulations!: RegulationQueries;
  private replays!: ReplayQueries;
  private transformations!: TransformationQueries;
  private engage!: EngageQueries;
  private traffic!: TrafficQueries;
  private raw!: RawQueries;
  private observations!: ObservationQueries;

  /**
   * Carries change notifications between the threads of one process that
   * opened the same file (ingest on the main thread, the background stages on
   * a worker thread), so a commit on one connection wakes the other at once.
   * Undefined for `:memory:`, which no other connection can see.
   */
  private readonly peers: BroadcastChannel | undefined;

  /** One writer at a time among this process's threads (see WriteLock); undefined for `:memory:`. */
  private readonly writeLock: WriteLock | undefined;

  /** The stage thread's WAL checkpoints (see {@link checkpointOffTheIngestThread}). */
  private checkpointTimer: NodeJS.Timeout | undefined;
  /** Whether this connection checkpoints the WAL itself when a commit makes it long (SQLite's default). */
  private autoCheckpoint = true;

  private constructor(
    private readonly db: Database,
    file: string,
  ) {
    this.events.setMaxListeners(0);
    if (file !== ':memory:') {
      this.writeLock = new WriteLock(file);
      this.peers = new BroadcastChannel(`switchyard-sqlite:${file}`);
      this.peers.onmessage = (message) => this.events.emit('change', (message as { data: StoreTopic }).data);
      // Notifications are hints: they must never keep a finished process alive.
      this.peers.unref();
      if (!isMainThread) this.checkpointOffTheIngestThread();
    }
  }

  /**
   * SQLite checkpoints the WAL (copies it into the database file, then syncs
   * it) inside whichever commit makes the WAL pass 1,000 pages: every few
   * hundred group commits, the ingest thread stalled for tens of ms on it.
   * A connection opened in a worker thread (the stage thread) takes that job:
   * it checkpoints on a timer, outside the write lock (a passive checkpoint
   * runs beside writers), and the main thread's connection stops
   * checkpointing in its commits for as long as one does.
   */
  private checkpointOffTheIngestThread(): void {
    const lock = this.writeLock;
    if (lock === undefined) return;
    lock.checkpointing(true);
    this.checkpointTimer = setInterval(() => {
      try {
        if (this.db.open) this.db.pragma('wal_checkpoint(PASSIVE)');
      } catch {
        // A checkpoint that could not run leaves the WAL longer, nothing else: the next one catches up.
      }
    }, CHECKPOINT_EVERY_MS);
    this.checkpointTimer.unref();
  }

  /** Before a write on the main thread: checkpoint in commits only while no other connection does. */
  private matchCheckpointing(): void {
    const auto = !(this.writeLock?.checkpointedElsewhere ?? false) || this.checkpointTimer !== undefined;
    if (auto === this.autoCheckpoint) return;
    this.db.pragma(`wal_autocheckpoint = ${auto ? 1000 : 0}`);
    this.autoCheckpoint = auto;
  }

  static open(options: SqliteStoreOptions): SqliteStore {
    let file = ':memory:';
    if (options.dataDir !== ':memory:') {
      makePrivateDir(options.dataDir);
      file = path.join(options.dataDir, SQLITE_FILE);
      makePrivateFile(file);
    }
    const db = new BetterSqlite3(file);
    db.pragma('journal_mode = WAL');
    // WAL + NORMAL: a commit is in the OS once it returns (survives a process
    // crash); FULL also fsyncs the WAL on every commit (survives power loss).
    db.pragma(`synchronous = ${options.durability === 'fsync' ? 'FULL' : 'NORMAL'}`);
    db.pragma('busy_timeout = 5000');
    // 64 MiB of page cache (the default is 2 MiB): inserts into the indexes
    // of a large store, random message ids above all, stay in memory.
    db.pragma('cache_size = -65536');
    return new SqliteStore(db, file);
  }

  /**
   * Runs a synchronous write (a transaction or one statement) holding the
   * process's write lock for the file, so that the ingest and stage threads
   * never wait on each other in SQLite's sleeping busy handler.
   */
  private write<T>(run: () => T): Promise<T> {
    if (this.writeLock === undefined) return Promise.resolve().then(run);
    return this.writeLock.run(() => {
      this.matchCheckpointing();
      return run();
    });
  }

  async migrate(): Promise<void> {
    await this.write(() => migrate(this.db));
    // The query objects prepare their statements now, against the migrated
    // schema: built in open(), they would need tables that do not exist yet
    // on a new store (or would have to migrate inside open(), where a schema
    // error escapes openStore's close-on-failure path).
    this.traffic = new TrafficQueries(this.db);
    this.messages = new MessageQueries(this.db, this.traffic);
    this.observations = new ObservationQueries(this.db);
    this.raw = new RawQueries(this.db, this.messages, this.observations);
    this.deliveries = new DeliveryQueries(this.db, this.traffic);
    this.regulations = new RegulationQueries(this.db, this.messages);
    this.replays = new ReplayQueries(this.db);
    this.transformations = new TransformationQueries(this.db, this.traffic);
    this.engage = new EngageQueries(this.db, this.messages);
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.checkpointTimer !== undefined) {
      clearInterval(this.checkpointTimer);
      this.checkpointTimer = undefined;
      this.writeLock?.checkpointing(false);
    }
    this.events.removeAllListeners();
    this.peers?.close();
    if (this.db.open) this.db.close();
  }

  subscribe(listener: (topic: StoreTopic) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  private emit(topic: StoreTopic): void {
    this.events.emit('change', topic);
    this.peers?.postMessage(topic);
  }

  // --- settings -------------------------------------------------------------------

  async getSetting(key: string): Promise<string | undefined> {
    const row = this.db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
    return row?.value;
  }

  async insertSettingIfAbsent(key: string, value: string): Promise<boolean> {
    return this.write(() => this.db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING').run(key, value).changes > 0);
  }

  async putSetting(key: string, value: string): Promise<void> {
    await this.write(() => this.db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, value));
  }

  async getConfigVersion(): Promise<number> {
    return Number(await this.getSetting('config_version'));
  }

  /** Runs a config write and bumps the config version in the same transaction. */
  private async configChange<T>(write: () => T): Promise<T> {
    const result = await this.write(() =>
      this.db.transaction(() => {
        const value = write();
        this.db.prepare(`UPDATE settings SET value = CAST(value AS INTEGER) + 1 WHERE key = 'config_version'`).run();
        return value;
      }).immediate(),
    );
    this.emit('config');
    return result;
  }

  // --- sources and destinations ------------------------------------------------------

  async insertSource(source: SourceRecord): Promise<void> {
    await this.configChange(() => sources.insertSource(this.db, source));
  }

  async listSources(): Promise<SourceRecord[]> {
    return sources.listSources(this.db);
  }

  async getSource(id: string): Promise<SourceRecord | undefined> {
    return sources.getSource(this.db, id);
  }

  async updateSource(id: string, patch: SourcePatch, now: number): Promise<SourceRecord | undefined> {
    return this.configChange(() => sources.updateSource(this.db, id, patch, now));
  }

  async deleteSource(id: string): Promise<boolean> {
    return this.configChange(() => sources.deleteSource(this.db, id));
  }

  async putDestination(destination: DestinationRecord): Promise<void> {
    await this.configChange(() => sources.putDestination(this.db, destination));
  }

  async deleteDestination(sourceId: string, kind: DestinationKind): Promise<boolean> {
    return this.configChange(() => sources.deleteDestination(this.db, sourceId, kind));
  }

  async getDestination(sourceId: string, kind: DestinationKind): Promise<DestinationRecord | undefined> {
    return sources.getDestination(this.db, sourceId, kind);
  }

  async listDestinations(): Promise<DestinationRecord[]> {
    return sources.listDestinations(this.db);
  }

  async putTrackingPlan(sourceId: string, plan: string, now: number, newId: string): Promise<TrackingPlanRecord> {
    return this.configChange(() => trackingPlans.putTrackingPlan(this.db, sourceId, plan, now, newId));
  }

  async deleteTrackingPlan(sourceId: string, now: number): Promise<boolean> {
    return this.configChange(() => trackingPlans.deleteTrackingPlan(this.db, sourceId, now));
  }

  async getTrackingPlan(sourceId: string): Promise<TrackingPlanRecord | undefined> {
    return trackingPlans.getTrackingPlan(this.db, sourceId);
  }

  async listTrackingPlans(): Promise<TrackingPlanRecord[]> {
    return trackingPlans.listTrackingPlans(this.db);
  }

  // --- observed schema and violation counts ----------------------------------------------

  async observedEvents(sourceId: string, days: readonly number[], after: ObservedPosition | undefined, limit: number): Promise<{ events: ObservedEventRow[]; unrecordedMessages: number }> {
    return this.observations.observedEvents(sourceId, days, after, limit);
  }

  async observedPaths(sourceId: string, days: readonly number[], events: ReadonlyArray<{ type: string; event: string }>, perEvent: number): Promise<ObservedPathRow[]> {
    return this.observations.observedPaths(sourceId, days, events, perEvent);
  }

  async violationCounts(sourceId: string, sinceHour: number): Promise<ViolationRows> {
    return this.observations.violationCounts(sourceId, sinceHour);
  }

  async pruneObservations(schemaBefore: number, violationsBefore: number): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await this.write(() => this.db.transaction(() => this.observations.pruneBatch(schemaBefore, violationsBefore)).immediate());
      total += removed;
      if (removed === 0) return total;
      await nextTurn(); // let ingest and delivery run between batches
    }
  }

  // --- ingest ------------------------------------------------------------------------

  async prepareIngest(dedupeSince: number): Promise<void> {
    this.messages.prepareDedupeIndex(dedupeSince);
  }

  async appendMessages(entries: readonly IngestEntry[], dedupeSince: number): Promise<AppendResult[]> {
    const results = await this.write(() => this.messages.append(entries, dedupeSince));
    this.emit('messages');
    if (results.some((r, i) => r.status === 'accepted' && entries[i]!.destinations.length > 0)) this.emit('deliveries');
    return results;
  }

  async appendRawRequests(requests: readonly NewRawRequest[]): Promise<void> {
    if (requests.length === 0) return;
    await this.write(() => this.db.transaction(() => this.raw.append(requests)).immediate());
    this.emit('raw');
  }

  async processRawRequests(
    limits: { readonly maxRequests: number; readonly maxMessages: number },
    build: (requests: readonly RawRequest[]) => ReadonlyArray<readonly IngestEntry[]>,
    dedupeSince: number,
  ): Promise<RawProcessed> {
    // Read, built and observed outside the write lock, which ingest's commits
    // wait for: pure CPU, a quarter of the hold when it ran inside.
    const read = this.raw.oldestBatch(limits);
    if (read.taken.length === 0) return { requests: 0, results: [], caughtUp: true };
    const built = build(read.taken).flat();
    const observed = observedAsBuilt(built);
    const processed = await this.write(() =>
      this.db
        .transaction(() => {
          if (this.raw.unchangedSince(read.taken)) return { batch: read, ...this.raw.store(read.taken, built, dedupeSince, observed) };
          // Rows went meanwhile (a source deleted with its raw requests): the
          // batch again from what is left, built under the lock this time.
          const again = this.raw.oldestBatch(limits);
          return again.taken.length === 0 ? undefined : { batch: again, ...this.raw.store(again.taken, build(again.taken).flat(), dedupeSince) };
        })
        .immediate(),
    );
    if (processed === undefined) return { requests: 0, results: [], caughtUp: true };
    this.emit('messages');
    if (processed.deliveriesAdded) this.emit('deliveries');
    return { requests: processed.batch.taken.length, results: processed.results, caughtUp: !processed.batch.cut };
  }

  async rawBacklog(): Promise<RawBacklog> {
    return this.raw.backlogNow();
  }

  async highestRawSeq(): Promise<number> {
    return this.raw.highestSeq();
  }

  async hasRawRequestsUpTo(seq: number): Promise<boolean> {
    return this.raw.hasUpTo(seq);
  }

  async listRecentMessages(sourceId: string, limit: number): Promise<StoredMessage[]> {
    return this.messages.listRecent(sourceId, limit);
  }

  async listMessagesAfter(sourceId: string, afterSeq: number, limit: number, uptoSeq = Number.MAX_SAFE_INTEGER): Promise<StoredMessage[]> {
    return this.messages.listAfter(sourceId, afterSeq, limit, uptoSeq);
  }

  async countMessages(sourceId: string, afterSeq: number, beforeSeq?: number): Promise<number> {
    return this.messages.count(sourceId, afterSeq, beforeSeq);
  }

  async highestMessageSeq(): Promise<number> {
    return this.messages.highestSeq();
  }

  // --- regulations -------------------------------------------------------------------

  async createRegulation(regulation: NewRegulation): Promise<void> {
    if (regulationEffects(regulation.regulationType).suppression === undefined) {
      await this.write(() => this.db.transaction(() => this.regulations.create(regulation)).immediate());
    } else {
      await this.configChange(() => this.regulations.create(regulation));
    }
  }

  async listRegulations(filter: RegulationFilter): Promise<RegulationRecord[]> {
    return this.regulations.list(filter);
  }

  async getRegulation(id: string, sources?: RegulationSourcePage): Promise<RegulationDetail | undefined> {
    return this.regulations.get(id, sources);
  }

  async listPendingRegulationSteps(limit: number): Promise<RegulationStepKey[]> {
    return this.regulations.listPendingSteps(limit);
  }

  async runRegulationStep(step: RegulationStepRun): Promise<boolean> {
    const ran = await this.write(() => this.regulations.runStep(step));
    if (ran) {
      this.emit('messages');
      if (step.messages.some((m) => m.status === 'accepted' && m.destinations.length > 0)) this.emit('deliveries');
    }
    return ran;
  }

  async failRegulationStep(step: RegulationStepKey, error: string, at: number): Promise<boolean> {
    return this.write(() => this.regulations.failStep(step, error, at));
  }

  async listSuppressions(): Promise<SuppressionRecord[]> {
    return this.regulations.listSuppressions();
  }

  async countSuppressionsInForce(userIds: readonly string[], atMost: number): Promise<number> {
    return this.regulations.countInForce(userIds, atMost);
  }

  async listSuppressionChanges(afterSeq: number, limit: number): Promise<SuppressionChange[]> {
    return this.regulations.listSuppressionChanges(afterSeq, limit);
  }

  // --- delivery ----------------------------------------------------------------------

  async claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]> {
    return this.write(() => this.deliveries.claim(request));
  }

  async finishDeliveries(outcomes: readonly DeliveryOutcome[]): Promise<number> {
    return this.write(() => this.deliveries.finishAll(outcomes));
  }

  /** Single-node: every lease but the caller's belongs to a process that is gone (a crash, kill -9). */
  async releaseLeases(keepOwner: string, now: number): Promise<number> {
    const count = await this.write(() => this.deliveries.releaseLeases(keepOwner, now));
    if (count > 0) this.emit('deliveries');
    return count;
  }

  async makeDeliveryDueNow(id: number, now: number): Promise<boolean> {
    const changed = await this.write(() => this.deliveries.dueNow(id, now));
    if (changed) this.emit('deliveries');
    return changed;
  }

  async nextDeliveryDueAt(): Promise<number | undefined> {
    return this.deliveries.nextDueAt();
  }

  async listDeliveries(filter: DeliveryFilter): Promise<DeliveryRecord[]> {
    return this.deliveries.list(filter);
  }

  async getDelivery(id: number): Promise<DeliveryDetail | undefined> {
    return this.deliveries.get(id);
  }

  async requeueFailedDeliveries(filter: RequeueFilter, now: number): Promise<number> {
    const count = await this.write(() => this.deliveries.requeueFailed(filter, now));
    if (count > 0) this.emit('deliveries');
    return count;
  }

  // --- function destinations ----------------------------------------------------------

  async insertFunctionDestination(fn: NewFunctionDestination, maxPerSource: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal> {
    return this.configChange(() => functions.insertFunctionDestination(this.db, fn, maxPerSource));
  }

  async updateFunctionDestination(id: string, patch: FunctionDestinationPatch, at: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal | undefined> {
    return this.configChange(() => functions.updateFunctionDestination(this.db, id, patch, at));
  }

  async listFunctionDestinations(sourceId?: string): Promise<FunctionDestinationRecord[]> {
    return functions.listFunctionDestinations(this.db, sourceId);
  }

  async getFunctionDestination(id: string): Promise<FunctionDestinationRecord | undefined> {
    return functions.getFunctionDestination(this.db, id);
  }

  async getFunctionCode(id: string, version?: number): Promise<FunctionCodeRecord | undefined> {
    return functions.getFunctionCode(this.db, id, version);
  }

  async deleteFunctionDestination(id: string): Promise<boolean> {
    return this.configChange(() => functions.deleteFunctionDestination(this.db, id));
  }

  // --- transformations -------------------------------------------------------------------

  async insertTransformation(id: string, name: string, code: string, at: number): Promise<TransformationVersionRecord> {
    return this.write(() => this.transformations.insert(id, name, code, at));
  }

  async addTransformationVersion(id: string, code: string, name: string | undefined, at: number): Promise<TransformationVersionRecord | undefined> {
    return this.write(() => this.transformations.addVersion(id, code, name, at));
  }

  async listTransformations(): Promise<TransformationRecord[]> {
    return this.transformations.list();
  }

  async getTransformation(id: string): Promise<TransformationRecord | undefined> {
    return this.transformations.get(id);
  }

  async getTransformationVersion(id: string, version?: number): Promise<TransformationVersionRecord | undefined> {
    return this.transformations.getVersion(id, version);
  }

  async listTransformationVersions(id: string): Promise<Array<{ version: number; createdAt: number }>> {
    return this.transformations.versions(id);
  }

  async deleteTransformation(id: string): Promise<boolean> {
    return this.write(() => this.transformations.delete(id));
  }

  async listTransformingDeliveries(limit: number, skipSourceIds: readonly string[]): Promise<TransformingDelivery[]> {
    return this.transformations.transforming(limit, skipSourceIds);
  }

  async finishTransforms(results: readonly TransformResult[]): Promise<void> {
    if (results.length === 0) return;
    await this.write(() => this.transformations.finish(results));
    this.emit('deliveries');
    this.emit('messages');
  }

  // --- replays ------------------------------------------------------------------------

  async createReplay(replay: NewReplay, limits?: ReplayLimits): Promise<ReplayRefusal | undefined> {
    // Read first: every message committed by then has a seq no higher, and
    // the range read after it sees each of those that is in the range. One
    // committed later (on any connection: SQLite has one writer at a time)
    // gets a higher seq, past the cursor whatever the range read found.
    const highest = this.messages.highestSeq();
    const range = await this.replayRangeSeqs(replay.sourceId, replay.from, replay.to);
    const cursor = range === undefined ? highest : Math.min(highest, range.first - 1);
    return this.write(() => this.replays.create(replay, cursor, limits));
  }

  async replayRangeSeqs(sourceId: string, from: number, to: number): Promise<ReplayRange | undefined> {
    let range: { first: number; last: number } | undefined;
    let after: readonly [number, number] = [from, -1];
    for (;;) {
      const chunk = this.replays.rangeChunk(sourceId, from, to, after, REPLAY_RANGE_CHUNK);
      for (const [, seq] of chunk) range = range === undefined ? { first: seq, last: seq } : { first: Math.min(range.first, seq), last: Math.max(range.last, seq) };
      if (chunk.length < REPLAY_RANGE_CHUNK) return range;
      after = chunk[chunk.length - 1]!;
      // A long range: let other work run between chunks (better-sqlite3 blocks the thread).
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  async listReplays(sourceId: string, limit: number): Promise<ReplayRecord[]> {
    return this.replays.list(sourceId, limit);
  }

  async getReplay(id: string): Promise<ReplayRecord | undefined> {
    return this.replays.get(id);
  }

  async listRunningReplays(): Promise<ReplayRecord[]> {
    return this.replays.running();
  }

  async countPendingReplayDeliveries(replayId: string): Promise<number> {
    return this.replays.countPending(replayId);
  }

  async queueReplayPage(page: ReplayPage): Promise<boolean> {
    const queued = await this.write(() => this.replays.queuePage(page));
    if (queued && page.messageSeqs.length > 0) this.emit('deliveries');
    return queued;
  }

  async endReplay(id: string, status: 'done' | 'cancelled', at: number): Promise<ReplayRecord | undefined> {
    return this.write(() => this.replays.end(id, status, at));
  }

  // --- engage ------------------------------------------------------------------------

  async insertComputation(computation: ComputationRecord): Promise<boolean> {
    return this.write(() => this.engage.insertComputation(computation));
  }

  async listComputations(kind?: ComputationKind, sizes = true): Promise<ComputationRecord[]> {
    return this.engage.listComputations(kind, sizes);
  }

  async getComputation(id: string): Promise<ComputationRecord | undefined> {
    return this.engage.getComputation(id);
  }

  async updateComputation(id: string, patch: ComputationPatch, at: number): Promise<ComputationRecord | undefined> {
    return this.write(() => this.engage.updateComputation(id, patch, at));
  }

  async deleteComputation(id: string): Promise<boolean> {
    return this.write(() => this.engage.deleteComputation(id));
  }

  async listComputationMembers(computationId: string, limit: number, after?: Pick<ComputationMember, 'since' | 'profileId'>): Promise<ComputationMember[]> {
    return this.engage.listMembers(computationId, limit, after);
  }

  async findProfileIds(identifiers: readonly string[]): Promise<Map<string, string>> {
    return this.engage.findProfileIds(identifiers);
  }

  async getProfiles(ids: readonly string[]): Promise<ProfileRecord[]> {
    return this.engage.getProfiles(ids);
  }

  async listExpiredProfileIds(now: number, limit: number): Promise<string[]> {
    return this.engage.listExpiredProfileIds(now, limit);
  }

  async listProfileIds(afterId: string, limit: number): Promise<string[]> {
    return this.engage.listProfileIds(afterId, limit);
  }

  /** One writer hands out seqs inside its write lock: a commit never shows a seq above one still to come. */
  async settledMessageSeq(): Promise<SettledSeqRead> {
    return { seq: Number.MAX_SAFE_INTEGER, settling: false };
  }

  async listMessagesSince(afterSeq: number, limit: number, uptoSeq?: number): Promise<StoredMessage[]> {
    return this.engage.listMessagesSince(afterSeq, limit, uptoSeq);
  }

  async getMessagesBySeq(seqs: readonly number[]): Promise<StoredMessage[]> {
    return this.engage.getMessagesBySeq(seqs);
  }

  async getEngageCursor(): Promise<number> {
    return this.engage.getCursor();
  }

  async getEngageStreamPosition(): Promise<{ cursor: number; erasures: number }> {
    return this.engage.getStreamPosition();
  }

  async oldestUnevaluatedMessage(): Promise<{ seq: number; receivedAt: number } | undefined> {
    return this.engage.oldestUnevaluated();
  }

  async claimEngageLease(owner: string, now: number, ttlMs: number): Promise<boolean> {
    return this.write(() => this.engage.claimLease(owner, now, ttlMs));
  }

  async releaseEngageLease(owner: string): Promise<void> {
    await this.write(() => this.engage.releaseLease(owner));
  }

  /** Frees another owner's Engage lease: one `serve` per data folder (data-dir-lock.ts), so that owner is gone. */
  async releaseStaleEngageLease(keepOwner: string): Promise<boolean> {
    return this.write(() => this.engage.releaseOtherLease(keepOwner));
  }

  async releaseEngageSyncs(now: number, limit: number): Promise<{ released: number; parked: number }> {
    if (!this.engage.hasParkedSyncs()) return { released: 0, parked: 0 };
    const result = await this.write(() => this.engage.releaseSyncs(now, limit));
    if (result.released > 0) this.emit('deliveries');
    return result;
  }

  async commitEngage(batch: EngageBatch): Promise<boolean> {
    const committed = await this.write(() => this.engage.commit(batch));
    if (committed && batch.messages.length > 0) {
      this.emit('messages');
      if (batch.messages.some((m) => m.destinations.length > 0)) this.emit('deliveries');
    }
    return committed;
  }

  // --- traffic counters ------------------------------------------------------------------

  async trafficSince(since: number): Promise<TrafficCount[]> {
    return this.traffic.since(minuteOf(since));
  }

  // --- housekeeping ------------------------------------------------------------------

  /** De-duplication needs no pruning here: its index forgets by itself (see DedupeIndex). */
  async prune(before: number): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await this.write(() => this.db.transaction(() => this.messages.pruneBatch(before)).immediate());
      total += removed;
      if (removed === 0) return total + (await this.write(() => this.traffic.pruneBefore(before)));
      await nextTurn(); // let ingest and delivery run between batches
    }
  }

}
