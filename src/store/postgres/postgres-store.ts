import * as observations from './observation-queries.js';
import type { ObservedEventRow, ObservedPathRow, ObservedPosition } from '../../domain/observed-schema.js';
import type { ViolationRows } from '../../domain/plan-violation-counts.js';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { regulationEffects } from '../../domain/regulation.js';
import type { DestinationKind } from '../../domain/routing.js';
import { type TrafficCount, minuteOf } from '../../domain/traffic.js';
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
  ProcessingOptions,
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
import { ChangeListener, notifyStatement } from './change-listener.js';
import { clientConfig, describeDatabase, inTransaction } from './connection.js';
import * as deliveries from './delivery-queries.js';
import * as engage from './engage-queries.js';
import { EngageConflict } from '../engage-rows.js';
import * as messages from './message-queries.js';
import * as raw from './raw-queries.js';
import { migrate } from './migrations.js';
import * as regulations from './regulation-queries.js';
import * as replays from './replay-queries.js';
import * as transformations from './transformation-queries.js';
import * as functions from './function-queries.js';
import type { FunctionCodeRecord, FunctionDestinationPatch, FunctionDestinationRecord, FunctionWriteRefusal, NewFunctionDestination } from '../function-records.js';
import type { TransformResult, TransformationRecord, TransformationVersionRecord, TransformingDelivery } from '../transformation-records.js';
import { SettledSeq, WRITE_BEGIN } from './settled-seq.js';
import * as sources from './source-queries.js';
import * as trackingPlans from './tracking-plan-queries.js';
import type { TrackingPlanRecord } from '../tracking-plan-records.js';
import * as traffic from './traffic-queries.js';

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
  readonly capabilities: StoreCapabilities = { name: 'postgres', multiNode: true, preparesIngest: false, releasesLeases: false };
  /** Tags this node's notifications, so that it does not hear its own. */
  private readonly nodeId = randomUUID();
  private readonly events = new EventEmitter();
  private readonly listener: ChangeListener;
  private readonly settledSeq = new SettledSeq();
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

  /**
   * Runs `work` in one transaction. The topics it names are notified to
   * other nodes in that transaction, and to this node's subscribers once it
   * has committed.
   */
  private async write<T>(work: (client: pg.ClientBase) => Promise<{ value: T; topics: readonly StoreTopic[] }>): Promise<T> {
    // WRITE_BEGIN: some writes insert messages (Engage's syncs, regulations, appendMessages).
    const { value, topics } = await inTransaction(
      this.pool,
      async (client) => {
        const done = await work(client);
        if (done.topics.length > 0) await client.query(notifyStatement(done.topics, this.nodeId));
        return done;
      },
      WRITE_BEGIN,
    );
    for (const topic of topics) this.emit(topic);
    return value;
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

  async putSetting(key: string, value: string): Promise<void> {
    await this.pool.query('INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]);
  }

  async getConfigVersion(): Promise<number> {
    return Number(await this.getSetting('config_version'));
  }

  /**
   * Bumps the config version, runs a config write and notifies, in one
   * transaction. The bump comes first: the version row stays locked until
   * commit, so config writes from all nodes queue up there before writing
   * anything, and two of them never deadlock on the rows they write (e.g. the
   * suppressions of requests naming the same users). They are rare.
   */
  private async configChange<T>(write: (client: pg.ClientBase) => Promise<T>): Promise<T> {
    return this.write(async (client) => {
      await client.query(`UPDATE settings SET value = (value::bigint + 1)::text WHERE key = 'config_version'`);
      return { value: await write(client), topics: ['config'] };
    });
  }

  // --- sources and destinations ------------------------------------------------------

  async insertSource(source: SourceRecord): Promise<void> {
    await this.configChange((client) => sources.insertSource(client, source));
  }

  async listSources(): Promise<SourceRecord[]> {
    return sources.listSources(this.pool);
  }

  async getSource(id: string): Promise<SourceRecord | undefined> {
    return sources.getSource(this.pool, id);
  }

  async updateSource(id: string, patch: SourcePatch, now: number): Promise<SourceRecord | undefined> {
    return this.configChange((client) => sources.updateSource(client, id, patch, now));
  }

  async deleteSource(id: string): Promise<boolean> {
    return this.configChange((client) => sources.deleteSource(client, id));
  }

  async putDestination(destination: DestinationRecord): Promise<void> {
    await this.configChange((client) => sources.putDestination(client, destination));
  }

  async deleteDestination(sourceId: string, kind: DestinationKind): Promise<boolean> {
    return this.configChange((client) => sources.deleteDestination(client, sourceId, kind));
  }

  async getDestination(sourceId: string, kind: DestinationKind): Promise<DestinationRecord | undefined> {
    return sources.getDestination(this.pool, sourceId, kind);
  }

  async listDestinations(): Promise<DestinationRecord[]> {
    return sources.listDestinations(this.pool);
  }

  async putTrackingPlan(sourceId: string, plan: string, now: number, newId: string): Promise<TrackingPlanRecord> {
    return this.configChange((client) => trackingPlans.putTrackingPlan(client, sourceId, plan, now, newId));
  }

  async deleteTrackingPlan(sourceId: string, now: number): Promise<boolean> {
    return this.configChange((client) => trackingPlans.deleteTrackingPlan(client, sourceId, now));
  }

  async getTrackingPlan(sourceId: string): Promise<TrackingPlanRecord | undefined> {
    return trackingPlans.getTrackingPlan(this.pool, sourceId);
  }

  async listTrackingPlans(): Promise<TrackingPlanRecord[]> {
    return trackingPlans.listTrackingPlans(this.pool);
  }

  // --- observed schema and violation counts ----------------------------------------------

  async observedEvents(sourceId: string, days: readonly number[], after: ObservedPosition | undefined, limit: number): Promise<{ events: ObservedEventRow[]; unrecordedMessages: number }> {
    return observations.observedEvents(this.pool, sourceId, days, after, limit);
  }

  async observedPaths(sourceId: string, days: readonly number[], events: ReadonlyArray<{ type: string; event: string }>, perEvent: number): Promise<ObservedPathRow[]> {
    return observations.observedPaths(this.pool, sourceId, days, events, perEvent);
  }

  async violationCounts(sourceId: string, sinceHour: number): Promise<ViolationRows> {
    return observations.violationCounts(this.pool, sourceId, sinceHour);
  }

  async pruneObservations(schemaBefore: number, violationsBefore: number): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await observations.pruneObservationsBatch(this.pool, schemaBefore, violationsBefore);
      total += removed;
      if (removed === 0) return total;
    }
  }

  // --- ingest ------------------------------------------------------------------------

  /** Nothing to load: de-duplication is an upsert in the database (`capabilities.preparesIngest` is false). */
  async prepareIngest(): Promise<void> {}

  async appendMessages(entries: readonly IngestEntry[], dedupeSince: number): Promise<AppendResult[]> {
    if (entries.length === 0) return [];
    return this.write(async (client) => {
      const { results, deliveriesAdded } = await messages.appendMessages(client, entries, dedupeSince);
      await traffic.addTraffic(
        client,
        'messages',
        results.map((result, i) => ({ at: entries[i]!.receivedAt, status: result.status })),
      );
      return { value: results, topics: deliveriesAdded ? ['messages', 'deliveries'] : ['messages'] };
    });
  }

  async appendRawRequests(requests: readonly NewRawRequest[]): Promise<void> {
    if (requests.length === 0) return;
    await raw.appendRawRequests(this.pool, requests, this.nodeId);
    this.emit('raw');
  }

  async processRawRequests(
    limits: { readonly maxRequests: number; readonly maxMessages: number },
    build: (requests: readonly RawRequest[]) => ReadonlyArray<readonly IngestEntry[]>,
    dedupeSince: number,
    options: ProcessingOptions = {},
  ): Promise<RawProcessed> {
    // The transaction's last statement notifies (no round trip of its own, as write() would take).
    const topicsOf = (deliveriesAdded: boolean): StoreTopic[] => (deliveriesAdded ? ['messages', 'deliveries'] : ['messages']);
    const locked = options.ordered !== false;
    const { requests, results, deliveriesAdded, caughtUp } = await inTransaction(this.pool, (client) =>
      raw.processRawRequests(client, limits, build, dedupeSince, { nodeId: this.nodeId, topics: topicsOf }, locked),
      locked ? raw.PROCESS_RAW_LOCKED_BEGIN : raw.PROCESS_RAW_BEGIN,
    );
    if (requests > 0) for (const topic of topicsOf(deliveriesAdded)) this.emit(topic);
    return { requests, results, caughtUp };
  }

  async rawBacklog(): Promise<RawBacklog> {
    return raw.rawBacklog(this.pool);
  }

  async highestRawSeq(): Promise<number> {
    return raw.highestRawSeq(this.pool);
  }

  async hasRawRequestsUpTo(seq: number): Promise<boolean> {
    return raw.hasRawRequestsUpTo(this.pool, seq);
  }

  async listRecentMessages(sourceId: string, limit: number): Promise<StoredMessage[]> {
    return messages.listRecentMessages(this.pool, sourceId, limit);
  }

  async listMessagesAfter(sourceId: string, afterSeq: number, limit: number, uptoSeq = Number.MAX_SAFE_INTEGER): Promise<StoredMessage[]> {
    return messages.listMessagesAfter(this.pool, sourceId, afterSeq, limit, uptoSeq);
  }

  async countMessages(sourceId: string, afterSeq: number, beforeSeq?: number): Promise<number> {
    return messages.countMessages(this.pool, sourceId, afterSeq, beforeSeq);
  }

  async highestMessageSeq(): Promise<number> {
    return messages.highestMessageSeq(this.pool);
  }

  // --- delivery ----------------------------------------------------------------------

  /** Releases nothing: another node's worker may be alive (`capabilities.releasesLeases` is false); leases expire by themselves. */
  async releaseLeases(): Promise<number> {
    return 0;
  }

  async claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]> {
    return deliveries.claimDeliveries(this.pool, request);
  }

  async finishDeliveries(outcomes: readonly DeliveryOutcome[]): Promise<number> {
    return deliveries.finishDeliveries(this.pool, outcomes);
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
    return this.write(async (client) => {
      const count = await deliveries.requeueFailedDeliveries(client, filter, now);
      return { value: count, topics: count > 0 ? ['deliveries'] : [] };
    });
  }

  // --- function destinations ----------------------------------------------------------

  async insertFunctionDestination(fn: NewFunctionDestination, maxPerSource: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal> {
    return this.configChange((client) => functions.insertFunctionDestination(client, fn, maxPerSource));
  }

  async updateFunctionDestination(id: string, patch: FunctionDestinationPatch, at: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal | undefined> {
    return this.configChange((client) => functions.updateFunctionDestination(client, id, patch, at));
  }

  async listFunctionDestinations(sourceId?: string): Promise<FunctionDestinationRecord[]> {
    return functions.listFunctionDestinations(this.pool, sourceId);
  }

  async getFunctionDestination(id: string): Promise<FunctionDestinationRecord | undefined> {
    return functions.getFunctionDestination(this.pool, id);
  }

  async getFunctionCode(id: string, version?: number): Promise<FunctionCodeRecord | undefined> {
    return functions.getFunctionCode(this.pool, id, version);
  }

  async deleteFunctionDestination(id: string): Promise<boolean> {
    return this.configChange((client) => functions.deleteFunctionDestination(client, id));
  }

  // --- transformations -------------------------------------------------------------------

  async insertTransformation(id: string, name: string, code: string, at: number): Promise<TransformationVersionRecord> {
    return this.write(async (client) => ({ value: await transformations.insertTransformation(client, id, name, code, at), topics: [] }));
  }

  async addTransformationVersion(id: string, code: string, name: string | undefined, at: number): Promise<TransformationVersionRecord | undefined> {
    return this.write(async (client) => ({ value: await transformations.addTransformationVersion(client, id, code, name, at), topics: [] }));
  }

  async listTransformations(): Promise<TransformationRecord[]> {
    return transformations.listTransformations(this.pool);
  }

  async getTransformation(id: string): Promise<TransformationRecord | undefined> {
    return transformations.getTransformation(this.pool, id);
  }

  async getTransformationVersion(id: string, version?: number): Promise<TransformationVersionRecord | undefined> {
    return transformations.getTransformationVersion(this.pool, id, version);
  }

  async listTransformationVersions(id: string): Promise<Array<{ version: number; createdAt: number }>> {
    return transformations.listTransformationVersions(this.pool, id);
  }

  async deleteTransformation(id: string): Promise<boolean> {
    return this.write(async (client) => ({ value: await transformations.deleteTransformation(client, id), topics: [] }));
  }

  async listTransformingDeliveries(limit: number, skipSourceIds: readonly string[]): Promise<TransformingDelivery[]> {
    return transformations.listTransformingDeliveries(this.pool, limit, skipSourceIds);
  }

  async finishTransforms(results: readonly TransformResult[]): Promise<void> {
    if (results.length === 0) return;
    await this.write(async (client) => {
      await transformations.finishTransforms(client, results);
      return { value: undefined, topics: ['deliveries', 'messages'] };
    });
  }

  async makeDeliveryDueNow(id: number, now: number): Promise<boolean> {
    return this.write(async (client) => {
      const changed = await deliveries.makeDeliveryDueNow(client, id, now);
      return { value: changed, topics: changed ? ['deliveries'] : [] };
    });
  }

  // --- regulations -------------------------------------------------------------------

  async createRegulation(regulation: NewRegulation): Promise<void> {
    // Only a suppressing type changes what every node's ingest must know.
    if (regulationEffects(regulation.regulationType).suppression === undefined) {
      await inTransaction(this.pool, (client) => regulations.createRegulation(client, regulation));
    } else {
      await this.configChange((client) => regulations.createRegulation(client, regulation));
    }
  }

  async listRegulations(filter: RegulationFilter): Promise<RegulationRecord[]> {
    return regulations.listRegulations(this.pool, filter);
  }

  async getRegulation(id: string, sources?: RegulationSourcePage): Promise<RegulationDetail | undefined> {
    return regulations.getRegulation(this.pool, id, sources);
  }

  async listPendingRegulationSteps(limit: number): Promise<RegulationStepKey[]> {
    return regulations.listPendingRegulationSteps(this.pool, limit);
  }

  async runRegulationStep(step: RegulationStepRun): Promise<boolean> {
    return this.write(async (client) => {
      const ran = await regulations.runRegulationStep(client, step);
      if (ran === undefined) return { value: false, topics: [] };
      return { value: true, topics: ran.deliveriesAdded ? ['messages', 'deliveries'] : ['messages'] };
    });
  }

  async failRegulationStep(step: RegulationStepKey, error: string, at: number): Promise<boolean> {
    return inTransaction(this.pool, (client) => regulations.failRegulationStep(client, step, error, at));
  }

  async listSuppressions(): Promise<SuppressionRecord[]> {
    return regulations.listSuppressions(this.pool);
  }

  async countSuppressionsInForce(userIds: readonly string[], atMost: number): Promise<number> {
    return regulations.countSuppressionsInForce(this.pool, userIds, atMost);
  }

  async listSuppressionChanges(afterSeq: number, limit: number): Promise<SuppressionChange[]> {
    return regulations.listSuppressionChanges(this.pool, afterSeq, limit);
  }


  // --- replays ------------------------------------------------------------------------

  async createReplay(replay: NewReplay, limits?: ReplayLimits): Promise<ReplayRefusal | undefined> {
    // Settled first: every seq at or below it is committed (visible to the
    // range read after) or never will be; a message committed later, on any
    // node, with a seq at or below it does not exist. One above it is past
    // the cursor whatever the range read found.
    const settled = await this.settledMessageSeq();
    const range = await replays.replayRangeSeqs(this.pool, replay.sourceId, replay.from, replay.to);
    const cursor = range === undefined ? settled.seq : Math.min(settled.seq, range.first - 1);
    return inTransaction(this.pool, (client) => replays.createReplay(client, replay, cursor, limits));
  }

  async replayRangeSeqs(sourceId: string, from: number, to: number): Promise<ReplayRange | undefined> {
    return replays.replayRangeSeqs(this.pool, sourceId, from, to);
  }

  async listReplays(sourceId: string, limit: number): Promise<ReplayRecord[]> {
    return replays.listReplays(this.pool, sourceId, limit);
  }

  async getReplay(id: string): Promise<ReplayRecord | undefined> {
    return replays.getReplay(this.pool, id);
  }

  async listRunningReplays(): Promise<ReplayRecord[]> {
    return replays.listRunningReplays(this.pool);
  }

  async countPendingReplayDeliveries(replayId: string): Promise<number> {
    return replays.countPendingReplayDeliveries(this.pool, replayId);
  }

  async queueReplayPage(page: ReplayPage): Promise<boolean> {
    return this.write(async (client) => {
      const queued = await replays.queueReplayPage(client, page);
      return { value: queued, topics: queued && page.messageSeqs.length > 0 ? ['deliveries'] : [] };
    });
  }

  async endReplay(id: string, status: 'done' | 'cancelled', at: number): Promise<ReplayRecord | undefined> {
    return this.write(async (client) => ({ value: await replays.endReplay(client, id, status, at), topics: [] }));
  }

  // --- engage ------------------------------------------------------------------------

  async insertComputation(computation: ComputationRecord): Promise<boolean> {
    return engage.insertComputation(this.pool, computation);
  }

  async listComputations(kind?: ComputationKind, sizes = true): Promise<ComputationRecord[]> {
    return engage.listComputations(this.pool, kind, sizes);
  }

  async getComputation(id: string): Promise<ComputationRecord | undefined> {
    return engage.getComputation(this.pool, id);
  }

  async updateComputation(id: string, patch: ComputationPatch, at: number): Promise<ComputationRecord | undefined> {
    return engage.updateComputation(this.pool, id, patch, at);
  }

  async deleteComputation(id: string): Promise<boolean> {
    return inTransaction(this.pool, (client) => engage.deleteComputation(client, id));
  }

  async listComputationMembers(computationId: string, limit: number, after?: Pick<ComputationMember, 'since' | 'profileId'>): Promise<ComputationMember[]> {
    return engage.listMembers(this.pool, computationId, limit, after);
  }

  async findProfileIds(identifiers: readonly string[]): Promise<Map<string, string>> {
    return engage.findProfileIds(this.pool, identifiers);
  }

  async getProfiles(ids: readonly string[]): Promise<ProfileRecord[]> {
    return engage.getProfiles(this.pool, ids);
  }

  async listExpiredProfileIds(now: number, limit: number): Promise<string[]> {
    return engage.listExpiredProfileIds(this.pool, now, limit);
  }

  async listProfileIds(afterId: string, limit: number): Promise<string[]> {
    return engage.listProfileIds(this.pool, afterId, limit);
  }

  async settledMessageSeq(): Promise<SettledSeqRead> {
    return this.settledSeq.read(this.pool);
  }

  async listMessagesSince(afterSeq: number, limit: number, uptoSeq?: number): Promise<StoredMessage[]> {
    return engage.listMessagesSince(this.pool, afterSeq, limit, uptoSeq);
  }

  async getMessagesBySeq(seqs: readonly number[]): Promise<StoredMessage[]> {
    return engage.getMessagesBySeq(this.pool, seqs);
  }

  async getEngageCursor(): Promise<number> {
    return engage.getCursor(this.pool);
  }

  async getEngageStreamPosition(): Promise<{ cursor: number; erasures: number }> {
    return engage.getStreamPosition(this.pool);
  }

  async oldestUnevaluatedMessage(): Promise<{ seq: number; receivedAt: number } | undefined> {
    return engage.oldestUnevaluated(this.pool);
  }

  async claimEngageLease(owner: string, now: number, ttlMs: number): Promise<boolean> {
    return engage.claimLease(this.pool, owner, now, ttlMs, this.listener.backend());
  }

  async releaseEngageLease(owner: string): Promise<void> {
    await engage.releaseLease(this.pool, owner);
  }

  /** Frees nothing: another node may hold the lease and be alive (`capabilities.releasesLeases` is false). */
  async releaseStaleEngageLease(): Promise<boolean> {
    return false;
  }

  async releaseEngageSyncs(now: number, limit: number): Promise<{ released: number; parked: number }> {
    if (!(await engage.hasParkedSyncs(this.pool))) return { released: 0, parked: 0 };
    return this.write(async (client) => {
      const result = await engage.releaseSyncs(client, now, limit);
      return { value: result, topics: result.released > 0 ? ['deliveries'] : [] };
    });
  }

  async commitEngage(batch: EngageBatch): Promise<boolean> {
    try {
      return await this.write(async (client) => {
        const deliveriesAdded = await engage.commitEngage(client, batch);
        const topics: StoreTopic[] = batch.messages.length === 0 ? [] : deliveriesAdded ? ['messages', 'deliveries'] : ['messages'];
        return { value: true, topics };
      });
    } catch (error) {
      if (error instanceof EngageConflict) return false;
      throw error;
    }
  }

  // --- housekeeping ------------------------------------------------------------------

  /** Batch after batch, each its own short statements; other work runs between them. */
  async trafficSince(since: number): Promise<TrafficCount[]> {
    return traffic.trafficSince(this.pool, minuteOf(since));
  }

  async prune(before: number, dedupeBefore: number): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await messages.pruneBatch(this.pool, before, dedupeBefore);
      total += removed;
      if (removed === 0) return total + (await traffic.pruneTraffic(this.pool, before));
    }
  }
}

/** A short reason; a refused connection to a host with several addresses is an AggregateError without a message. */
function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return error.message || (typeof code === 'string' ? code : error.name);
}
