import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  type ComputationSpec,
  DefinitionError,
  type EngageMessage,
  EngageModel,
  type Outputs,
  type ProfileState,
  diffOutputs,
  emptyProfileState,
} from '../domain/engage/index.js';
import { regulationEffects } from '../domain/regulation.js';
import { type FunctionTarget, functionTarget } from '../domain/routing.js';
import { ordersPerUser } from '../domain/webhook-settings.js';
import type { ComputationRecord, DestinationRecord, EngageBatch, FunctionDestinationRecord, IngestEntry, Store, StoredMessage } from '../store/store.js';
import { ProfileCache } from './profile-cache.js';
import { lastSyncPerChain } from './sync-chains.js';
import { traceSyncs } from './sync-spans.js';
import type { Tracing } from '../telemetry/tracing.js';
import {
  type Definitions,
  type ParsedMessage,
  ProfileSet,
  type SyncTargets,
  RECENT_EVENTS,
  type Working,
  type WorkingProfile,
  firstIdentifier,
  unsentOutputs,
} from './profile-set.js';

export interface EngageRunnerOptions {
  readonly store: Store;
  readonly now: () => number;
  readonly newMessageId: () => string;
  /** How often to look for work when nothing wakes it (expiries are noticed at this pace). */
  readonly pollMs: number;
  readonly onError: (error: unknown) => void;
  /** This node's name for the lease; random by default. */
  readonly owner?: string;
  /** On: a span per sync (see sync-spans.ts). */
  readonly tracing?: Tracing | undefined;
}

/** Messages read per commit of the stream. */
const PAGE = 500;
/** Profiles per commit of a backfill or an expiry round. */
const PROFILE_PAGE = 200;
/** How long the lease lasts without renewal: another node takes over this long after this one dies. */
const LEASE_MS = 15_000;
/**
 * On a shared store a transaction can commit after one holding a higher seq:
 * a gap in the seqs may still fill. The evaluator waits this long at a gap
 * before going past it (a rolled-back insert leaves a gap forever).
 */
const GAP_GRACE_MS = 3_000;
/** Prefix of the `reason` of the identify messages Engage stores: the evaluator skips them. */
export const SYNC_REASON_PREFIX = 'engage:';
/** Regulations looked at per pass (newest first) for profiles to erase. */
const REGULATIONS_PER_PASS = 100;
/**
 * How often definitions, destinations and regulations are re-read while
 * messages keep the evaluator busy (at once after {@link EngageRunner.definitionsChanged}).
 */
const RELOAD_MS = 1_000;
/**
 * After a 'messages' notification, wait this long before reading: ingest
 * commits come in quick succession under load, and one page of many
 * messages is one commit here instead of one each.
 */
const GATHER_MS = 20;
/** The longest rest between two passes (see `wake`). */
const MAX_REST_MS = 1_000;
/**
 * The shortest rest after a pass that did work: messages gather meanwhile,
 * and a page of many is one commit instead of several (most of a page's
 * cost is writing pages of the store, shared by its messages).
 */
const MIN_REST_MS = 50;
/** Idle share of the thread over a pass and its rest below which the thread was saturated (see `wake`). */
const SATURATED_BELOW = 0.04;
/** … and above which it no longer is. */
const UNSATURATED_ABOVE = 0.1;
/**
 * How long the thread must stay never idle, pass after pass, before it counts
 * as saturated for good (not a burst). Measured in time, not passes: a pass
 * and its rest can be 60 ms, and a checkpoint or a warming-up process fills
 * a few of those. Once Engage is behind, the work it leaves the others
 * fills its rests too, so too short a window throttles Engage exactly when
 * it must catch up: at 1 s, half of the `engage.latency` runs fell seconds
 * behind (p99 1.7-2.5 s); at 2 s, p99 0.15-0.68 s over four runs while
 * `engage.overhead` (ingest saturating the thread) kept 0.85; at 3 s it
 * fell to 0.81, and without the rule to 0.66.
 */
const SATURATED_AFTER_MS = 2_000;
/** Rest ÷ work while the thread is saturated: Engage then takes at most a fifth of it. */
const SATURATED_REST_FACTOR = 4;
/**
 * Memory for profiles kept parsed between pages (see ProfileCache), as
 * estimated by ProfileSet: a user's next message within a while needs no
 * read (a quarter less work per message when users come back).
 */
const CACHE_BYTES = 32 * 1024 * 1024;

/** Parked syncs looked at per pass, and how soon to look again while some wait. */
const RELEASE_PER_PASS = 1_000;
const PARKED_POLL_MS = 50;

/** Stands for "never sent" in a diff, so that a backfill's first value always differs. */
const UNSENT = Symbol('unsent');

const ENGAGE_TYPES = new Set(['identify', 'track', 'page', 'screen', 'group', 'alias']);

/**
 * Evaluates computed traits and audiences (src/domain/engage) over the
 * committed message stream and sends their changes as identify messages.
 *
 * One node at a time does it (it holds the Engage lease in the store); each
 * page of messages, backfill page or expiry round is one commit carrying the
 * profiles' states and outputs, the identify messages with their
 * deliveries and the cursor, so a crash or restart resumes from the cursor
 * with nothing missed and nothing applied twice. Every profile write is
 * checked against the version it was read at, so if a lease changes hands
 * mid-way the older node's commit is refused instead of overwriting.
 */
export class EngageRunner {
  private readonly owner: string;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;
  private definitionsKey = '';
  private definitions: Definitions | undefined;
  /** seq just after the cursor → when a gap there was first seen (shared stores). */
  private gapSeenAt: { seq: number; at: number } | undefined;
  private readonly erasedRegulations = new Set<string>();
  private reloadAfter = 0;
  private gathering: NodeJS.Timeout | undefined;
  private leaseUntil = 0;
  /** Whether the first pass freed a lease left by a dead run (single-node stores), or found none to free. */
  private staleLeaseReleased = false;
  /** Whether the last stream page read was full (more was waiting). */
  private behind = false;
  /** Since when every pass, with its rest, found the thread never idle (see `wake`); undefined: the last one did not. */
  private busySince: number | undefined;
  /** Whether parked syncs may be waiting (see engage-sync-chain.ts): at start, some may be left from before. */
  private parkedMaybe = true;
  /** The last sync timestamp handed out (see `stamp`). */
  private lastStamp = 0;
  /** Only right while this node holds the lease without a break and its commits succeed. */
  private readonly cache = new ProfileCache(CACHE_BYTES);

  constructor(private readonly options: EngageRunnerOptions) {
    this.owner = options.owner ?? `engage-${randomUUID()}`;
  }

  start(): void {
    this.unsubscribe = this.options.store.subscribe((topic) => {
      if (topic !== 'messages') return;
      if (this.running !== undefined) this.again = true;
      else if (this.gathering === undefined) {
        this.gathering = setTimeout(() => {
          this.gathering = undefined;
          this.wake();
        }, GATHER_MS);
        this.gathering.unref();
      }
    });
    this.schedule(0);
  }

  /** A definition was created, changed or deleted on this node: re-read them before the next page. */
  definitionsChanged(): void {
    this.reloadAfter = 0;
    this.wake();
  }

  /** Looks for work now (messages arrived), or once more after the current pass. */
  wake(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = (async () => {
      let worked = false;
      try {
        do {
          this.again = false;
          const started = performance.now();
          const before = performance.eventLoopUtilization();
          worked = await this.pass();
          // The SQLite store works synchronously and has one writer: without a
          // pause, catching up on a backlog would hold the write lock and the
          // CPU that ingest needs. After a pass that worked it rests as long
          // as it worked (at least MIN_REST_MS): at most half of its thread.
          // When the thread was never idle over a pass and its rest, the
          // thread is saturated (ingest, delivery and Engage share it on one
          // core) pass after pass for two seconds: Engage then rests four times as long
          // and takes at most a fifth, falling behind while ingest is saturated
          // and catching up after. (Whether the other work filled the rest
          // says nothing: it does what waited during the pass then.)
          if (worked) {
            const saturated = this.busySince !== undefined && started - this.busySince >= SATURATED_AFTER_MS;
            const factor = saturated ? SATURATED_REST_FACTOR : 1;
            // Behind, there is no need to wait for messages to gather.
            const least = this.behind ? 0 : MIN_REST_MS;
            await sleep(Math.min(MAX_REST_MS, Math.max(least, (performance.now() - started) * factor)));
            const idle = 1 - performance.eventLoopUtilization(before).utilization;
            if (idle < SATURATED_BELOW || (saturated && idle < UNSATURATED_ABOVE)) this.busySince ??= started;
            else this.busySince = undefined;
          } else {
            // Caught up: whatever kept the thread busy did not keep Engage behind.
            this.busySince = undefined;
            await nextTurn();
          }
        } while ((this.again || worked) && !this.stopped);
      } catch (error) {
        // A page may have changed cached states in place and not committed them.
        this.cache.clear();
        this.options.onError(error);
      } finally {
        this.running = undefined;
        // A parked sync waits for the one before it to finish: look again soon.
        this.schedule(this.parkedMaybe ? Math.min(PARKED_POLL_MS, this.options.pollMs) : this.options.pollMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    clearTimeout(this.timer);
    clearTimeout(this.gathering);
    await this.running;
    this.cache.clear();
    await this.options.store.releaseEngageLease(this.owner).catch(() => {});
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.wake(), ms);
    this.timer.unref();
  }

  /** One round of work; resolves whether it did any (there may be more). */
  private async pass(): Promise<boolean> {
    const { store, now } = this.options;
    // Renewed when half gone: not a write per page.
    if (!this.staleLeaseReleased) {
      // A run killed with SIGKILL held the lease: on a single-node store it is
      // gone for sure, so do not wait up to LEASE_MS for that lease to end.
      if (store.capabilities.releasesLeases) await store.releaseStaleEngageLease(this.owner);
      this.staleLeaseReleased = true;
    }
    const at = now();
    if (at > this.leaseUntil - LEASE_MS / 2) {
      // Lapsed: another node may have had it meanwhile and changed profiles.
      if (at >= this.leaseUntil) this.cache.clear();
      if (!(await store.claimEngageLease(this.owner, at, LEASE_MS))) {
        this.leaseUntil = 0;
        this.cache.clear();
        return false;
      }
      this.leaseUntil = at + LEASE_MS;
    }
    let definitions = this.definitions;
    if (definitions === undefined || at >= this.reloadAfter) {
      definitions = await this.loadDefinitions();
      await this.eraseRegulatedProfiles(definitions);
      this.reloadAfter = at + RELOAD_MS;
    }
    const computing = [...definitions.byId.values()].filter((c) => c.status === 'computing');
    if (computing.length > 0) {
      try {
        await this.backfill(definitions, computing);
      } finally {
        // It wrote profiles without the cache (new versions, new accumulators).
        this.cache.clear();
      }
      return true;
    }
    const expired = await this.expire(definitions);
    const streamed = await this.streamPage(definitions);
    await this.releaseParkedSyncs();
    return expired || streamed;
  }

  /** After a commit of `work`: the cache takes what it wrote, or is emptied when it was refused. */
  private settle(work: ProfileSet, committed: boolean): boolean {
    if (committed) work.committed();
    else {
      this.cache.clear();
      // A computation may have been deleted or redefined on another node: re-read them first.
      this.reloadAfter = 0;
    }
    return committed;
  }

  /**
   * Commits a batch: the last sync of each chain only (an earlier one would
   * be superseded at once), refused when a computation it writes members or
   * syncs of (or `also`) was deleted or redefined meanwhile.
   */
  private async commit(definitions: Definitions, batch: EngageBatch, also: Iterable<string> = []): Promise<boolean> {
    const ids = new Set(also);
    for (const profile of batch.profiles) for (const change of profile.membershipChanges) ids.add(change.computationId);
    const messages = lastSyncPerChain(batch.messages);
    for (const message of messages) if (message.engageSync !== undefined) ids.add(message.engageSync.computationId);
    const computations: Array<{ id: string; version: number }> = [];
    for (const id of ids) {
      const computation = definitions.byId.get(id);
      if (computation !== undefined) computations.push({ id, version: computation.version });
    }
    const syncs = traceSyncs(this.options.tracing, messages);
    let committed = false;
    try {
      committed = await this.options.store.commitEngage({ ...batch, messages: syncs.messages, computations });
    } finally {
      syncs.end(committed);
    }
    if (committed && messages.some((m) => m.engageSync !== undefined)) this.parkedMaybe = true;
    return committed;
  }

  /** Releases parked syncs whose older one finished; resolves whether some stay parked. */
  private async releaseParkedSyncs(): Promise<boolean> {
    if (!this.parkedMaybe) return false;
    const { parked } = await this.options.store.releaseEngageSyncs(this.options.now(), RELEASE_PER_PASS);
    this.parkedMaybe = parked > 0;
    return this.parkedMaybe;
  }

  // --- definitions -----------------------------------------------------------------------

  private async loadDefinitions(): Promise<Definitions> {
    const { store } = this.options;
    const [computations, destinations, functions] = await Promise.all([store.listComputations(undefined, false), store.listDestinations(), store.listFunctionDestinations()]);
    const syncTargets = syncTargetsOf(destinations, functions);
    const key = JSON.stringify(computations.map((c) => [c.id, c.version, c.status, c.key, c.destinations]));
    if (this.definitions === undefined || key !== this.definitionsKey) {
      const model = compileTolerantly(computations.map(toSpec), this.options.onError);
      const compiled = new Set(model.specs.map((s) => s.id));
      const byId = new Map(computations.filter((c) => compiled.has(c.id)).map((c) => [c.id, c]));
      const baseline = model.evaluate(emptyProfileState(), this.options.now());
      this.definitions = { model, byId, baseline, unsent: unsentOutputs(baseline, byId), syncTargets };
      this.definitionsKey = key;
      // Cached outputs were read for the old definitions; deleting one also deleted its rows.
      this.cache.clear();
    } else {
      this.definitions = { ...this.definitions, syncTargets };
    }
    return this.definitions;
  }

  // --- the message stream --------------------------------------------------------------------

  /** Applies the next page of the stream; resolves whether it committed one. */
  private async streamPage(definitions: Definitions): Promise<boolean> {
    const { store, now } = this.options;
    const cursor = await store.getEngageCursor();
    let page = await store.listMessagesSince(cursor, PAGE);
    this.behind = page.length === PAGE;
    if (page.length === 0) return false;
    if (store.capabilities.multiNode) page = this.upToGap(cursor, page);
    if (page.length === 0) return false;
    const at = now();
    const work = new ProfileSet(store, definitions, at, this.cache);
    // Each body is parsed once: for the identifiers to preload, then to apply.
    const parsed = page.map((stored) => (stored.type === 'delete' ? undefined : engageMessageOf(stored)));
    await work.preload(page.flatMap((stored, i) => identifiersOf(stored, parsed[i])));
    const messages: IngestEntry[] = [];
    // A profile is evaluated once per page, after all its messages (see evaluatePage).
    const applied = new Set<Working>();
    for (const [i, stored] of page.entries()) {
      if (stored.type === 'delete' && stored.userId !== undefined && stored.status === 'accepted') {
        messages.push(...this.evaluatePage(definitions, work, applied, at));
        await work.erase(`user_id:${stored.userId}`);
        continue;
      }
      const message = parsed[i];
      if (message === undefined) continue;
      const profile = await work.resolve(stored, message);
      definitions.model.apply(profile.state, message.engage);
      profile.recentSeqs = [stored.seq, ...profile.recentSeqs.slice(0, RECENT_EVENTS - 1)];
      profile.dirty = true;
      applied.add(profile);
    }
    messages.push(...this.evaluatePage(definitions, work, applied, at));
    const batch: EngageBatch = { cursor: { from: cursor, to: page[page.length - 1]!.seq }, ...work.toBatch(), messages, at };
    // A refused commit (the lease changed hands) waits for the next poll.
    return this.settle(work, await this.commit(definitions, batch));
  }

  /**
   * Evaluates the profiles a page changed and returns their syncs: once per
   * profile and page, however many of its messages the page holds, so a
   * message costs an apply (bounded accumulators) and a heavy user's backlog
   * costs one evaluation, one state write and at most one sync per output per
   * page (a change undone within the page sends nothing; the last value
   * goes). A profile merged away mid-page is evaluated as the survivor.
   */
  private evaluatePage(definitions: Definitions, work: ProfileSet, applied: Set<Working>, at: number): IngestEntry[] {
    const messages: IngestEntry[] = [];
    for (const profile of applied) {
      if (!work.holds(profile)) continue;
      const after = definitions.model.evaluate(profile.state, at);
      messages.push(...this.syncsFor(definitions, profile, profile.current, after, profile.resend, profile.lostMemberships, at));
      profile.current = after;
      profile.resend = false;
      profile.lostMemberships = [];
    }
    applied.clear();
    return messages;
  }

  /** The page up to the first gap in seqs, unless that gap has been there longer than the grace. */
  private upToGap(cursor: number, page: StoredMessage[]): StoredMessage[] {
    let expected = cursor + 1;
    for (let i = 0; i < page.length; i++) {
      const seq = page[i]!.seq;
      if (seq !== expected && (i > 0 || cursor > 0)) {
        const now = this.options.now();
        if (this.gapSeenAt?.seq !== expected) this.gapSeenAt = { seq: expected, at: now };
        if (now - this.gapSeenAt.at < GAP_GRACE_MS) {
          this.schedule(GAP_GRACE_MS);
          return page.slice(0, i);
        }
      }
      expected = seq + 1;
    }
    return page;
  }

  // --- expiry ---------------------------------------------------------------------------------

  /** Re-evaluates profiles whose windows have moved on; resolves whether there may be more. */
  private async expire(definitions: Definitions): Promise<boolean> {
    const { store, now } = this.options;
    const at = now();
    const ids = await store.listExpiredProfileIds(at, PROFILE_PAGE);
    if (ids.length === 0) return false;
    const work = new ProfileSet(store, definitions, at, this.cache);
    const messages: IngestEntry[] = [];
    for (const profile of await work.load(ids)) {
      const after = definitions.model.evaluate(profile.state, at);
      messages.push(...this.syncsFor(definitions, profile, profile.current, after, false, [], at));
      profile.current = after;
      profile.dirty = true;
    }
    const committed = this.settle(work, await this.commit(definitions, { ...work.toBatch(), messages, at }));
    return committed && ids.length === PROFILE_PAGE;
  }

  // --- backfill ----------------------------------------------------------------------------------

  /**
   * Computes new (or redefined) computations over the stored history, then
   * sends one identify per member or value of each and marks them live. Runs
   * before the stream moves on, so the history it reads ends at the cursor.
   * Several created at once share one read of the history.
   */
  private async backfill(definitions: Definitions, computations: readonly ComputationRecord[]): Promise<void> {
    const { store, now } = this.options;
    const cursor = await store.getEngageCursor();
    const only = new Set(computations.map((c) => c.id));
    const reset = (state: ProfileState): void => {
      for (const id of only) definitions.model.reset(state, id);
    };
    const touched = new Set<string>();
    // 1. History, page by page: each touched profile forgets the computations' accumulators first.
    for (let after = 0; ; ) {
      const page = await store.listMessagesSince(after, PAGE, cursor);
      if (page.length === 0) break;
      after = page[page.length - 1]!.seq;
      const at = now();
      const work = new ProfileSet(store, definitions, at);
      const found = await store.findProfileIds([...new Set(page.flatMap((stored) => identifiersOf(stored)))]);
      const profiles = new Map((await work.load([...new Set(found.values())])).map((p) => [p.id, p]));
      for (const stored of page) {
        const message = engageMessageOf(stored);
        if (message === undefined) continue;
        const id = message.identifiers.map((i) => found.get(i)).find((p) => p !== undefined);
        const profile = id === undefined ? undefined : profiles.get(id);
        if (profile === undefined) continue;
        if (!touched.has(profile.id)) {
          reset(profile.state);
          touched.add(profile.id);
        }
        definitions.model.apply(profile.state, message.engage, only);
        profile.dirty = true;
      }
      if (!(await this.commit(definitions, { ...work.toBatch(false), messages: [], at }, only))) return; // changed meanwhile: start again
      await this.renewLease();
      await nextTurn();
    }
    // 2. Every profile: evaluate, store outputs, send each computation's members or values (and what changed in others).
    for (let afterId = ''; ; ) {
      const ids = await store.listProfileIds(afterId, PROFILE_PAGE);
      const at = now();
      const last = ids.length < PROFILE_PAGE;
      const work = new ProfileSet(store, definitions, at);
      const messages: IngestEntry[] = [];
      for (const profile of await work.load(ids)) {
        if (!touched.has(profile.id)) reset(profile.state);
        const before = { ...profile.current };
        const after = definitions.model.evaluate(profile.state, at);
        for (const computation of computations) {
          // A first sync: the value is sent whatever was sent before, unless it is "nothing" now and was then.
          const value = after[computation.id];
          const stored = profile.storedRows[computation.id];
          const send = computation.kind === 'audience' ? value === true || stored === true : value !== undefined || stored !== undefined;
          before[computation.id] = send ? UNSENT : value;
        }
        messages.push(...this.syncsFor(definitions, profile, before, after, false, [], at, only));
        profile.current = after;
        profile.dirty = true;
      }
      const computationsLive = last ? computations.map((c) => ({ id: c.id, version: c.version })) : undefined;
      if (!(await this.commit(definitions, { ...work.toBatch(), messages, at, computationsLive }, only))) return;
      await this.renewLease();
      await nextTurn();
      if (last) return;
      afterId = ids[ids.length - 1]!;
    }
  }

  private async renewLease(): Promise<void> {
    const at = this.options.now();
    if (await this.options.store.claimEngageLease(this.owner, at, LEASE_MS)) this.leaseUntil = at + LEASE_MS;
  }

  // --- regulations ----------------------------------------------------------------------------

  /** Erases the profiles of users a deletion request names, once per request, sending nothing for them. */
  private async eraseRegulatedProfiles(definitions: Definitions): Promise<void> {
    const { store, now } = this.options;
    const regulations = await store.listRegulations({ limit: REGULATIONS_PER_PASS });
    for (const regulation of regulations) {
      if (this.erasedRegulations.has(regulation.id) || !regulationEffects(regulation.regulationType).deletes) continue;
      // Once its messages are erased, so that the stream cannot rebuild the profile from them.
      if (regulation.status !== 'FINISHED') continue;
      const marker = `engage_erased:${regulation.id}`;
      if ((await store.getSetting(marker)) === undefined) {
        const detail = await store.getRegulation(regulation.id);
        const at = now();
        const work = new ProfileSet(store, definitions, at, this.cache);
        for (const userId of detail?.subjectIds ?? []) await work.erase(`user_id:${userId}`);
        if (!this.settle(work, await store.commitEngage({ ...work.toBatch(), messages: [], at }))) return;
        await store.insertSettingIfAbsent(marker, String(at));
      }
      this.erasedRegulations.add(regulation.id);
    }
  }

  // --- syncs ----------------------------------------------------------------------------------

  /**
   * The identify messages for a profile's output changes: one per changed
   * computation with destinations, to each of those sources whose Webhooks
   * destination is enabled. `resend`: the profile gained a user id or merged,
   * so its current memberships and values go again. `computingIds`: a backfill
   * also sends the computations it computes, not yet live.
   */
  private syncsFor(
    definitions: Definitions,
    profile: WorkingProfile,
    before: Outputs,
    after: Outputs,
    resend: boolean,
    lostMemberships: readonly string[],
    at: number,
    computingIds?: ReadonlySet<string>,
  ): IngestEntry[] {
    const changes = new Map(diffOutputs(before, after));
    if (resend) {
      for (const [id, value] of Object.entries(after)) {
        const computation = definitions.byId.get(id);
        if (computation === undefined) continue;
        if (computation.kind === 'audience' ? value === true : value !== undefined) changes.set(id, value);
      }
      for (const id of lostMemberships) if (after[id] !== true) changes.set(id, false);
    }
    const entries: IngestEntry[] = [];
    for (const [id, value] of changes) {
      const computation = definitions.byId.get(id);
      if (computation === undefined || computation.destinations.length === 0) continue;
      if (computation.status !== 'live' && computingIds?.has(id) !== true) continue;
      // The moment this change was computed: distinct and increasing, so a receiver can order syncs by it.
      const stamp = this.stamp(at);
      for (const sourceId of computation.destinations) {
        const targets = definitions.syncTargets.get(sourceId);
        if (targets === undefined) continue;
        for (const userId of receiverIds(profile)) entries.push(this.syncEntry(sourceId, computation, profile, userId, value, stamp, targets));
      }
    }
    return entries;
  }

  /** `at`, or just after the last stamp when that is not earlier. */
  private stamp(at: number): number {
    this.lastStamp = Math.max(at, this.lastStamp + 1);
    return this.lastStamp;
  }

  /**
   * `userId`: one of the profile's user ids, each of which gets its own sync
   * (undefined: it has none). `targets`: the source's Webhooks destination
   * (when it orders per user, that keeps a key's syncs in order by itself)
   * and its function destinations (always on a sync chain: they are never
   * ordered).
   */
  private syncEntry(
    sourceId: string,
    computation: ComputationRecord,
    profile: WorkingProfile,
    userId: string | undefined,
    value: unknown,
    at: number,
    targets: SyncTargets,
  ): IngestEntry {
    const messageId = this.options.newMessageId();
    const anonymousId = firstIdentifier(profile, 'anonymous_id:');
    const iso = new Date(at).toISOString();
    const body = {
      version: 1,
      type: 'identify',
      ...(userId === undefined ? {} : { userId }),
      ...(anonymousId === undefined ? {} : { anonymousId }),
      traits: { [computation.key]: value === undefined ? null : value },
      context: {
        personas: {
          computation_class: computation.kind,
          computation_id: computation.id,
          computation_key: computation.key,
          namespace: 'default',
          space_id: 'default',
        },
      },
      messageId,
      timestamp: iso,
      receivedAt: iso,
    };
    return {
      sourceId,
      status: 'accepted',
      reason: `${SYNC_REASON_PREFIX}${computation.key}`,
      type: 'identify',
      messageId,
      userId,
      receivedAt: at,
      body: JSON.stringify(body),
      destinations: targets.webhooks === undefined ? targets.functions : ['webhooks', ...targets.functions],
      // An ordered Webhooks destination chains the key's deliveries (none may
      // be dropped from that chain); every other delivery is on a sync chain,
      // which keeps only the newest value per receiver key and destination
      // (see engage-sync-chain.ts).
      ...(targets.webhooks?.ordered === true && { orderKey: userId ?? anonymousId }),
      ...((targets.webhooks?.ordered !== true || targets.functions.length > 0) && {
        engageSync: { computationId: computation.id, key: userId !== undefined ? `u:${userId}` : `a:${anonymousId ?? ''}` },
      }),
    };
  }
}

/**
 * Where each source's syncs go: sources with an enabled Webhooks destination
 * or enabled function destinations. Syncs carry no `integrations` and skip the
 * source's filters, so every enabled one gets them.
 */
function syncTargetsOf(destinations: readonly DestinationRecord[], functions: readonly FunctionDestinationRecord[]): Map<string, SyncTargets> {
  const targets = new Map<string, { webhooks: { ordered: boolean } | undefined; functions: FunctionTarget[] }>();
  const of = (sourceId: string) => {
    let entry = targets.get(sourceId);
    if (entry === undefined) targets.set(sourceId, (entry = { webhooks: undefined, functions: [] }));
    return entry;
  };
  // Identify syncs are keyed like any identify where the destination orders per user.
  for (const d of destinations) if (d.kind === 'webhooks' && d.enabled) of(d.sourceId).webhooks = { ordered: ordersPerUser(d.settings) };
  // listFunctionDestinations is oldest first, as routing lists them.
  for (const f of functions) if (f.enabled) of(f.sourceId).functions.push(functionTarget(f.id));
  return targets;
}

/**
 * Every user id of the profile, sorted, or [undefined] when it has none (one
 * sync with its anonymous id): a receiver keyed by user id gets each of them
 * at the profile's value, merged-away ones included.
 */
function receiverIds(profile: WorkingProfile): Array<string | undefined> {
  const userIds = [...profile.identifiers].filter((i) => i.startsWith('user_id:')).map((i) => i.slice('user_id:'.length)).sort();
  return userIds.length === 0 ? [undefined] : userIds;
}

/** Compiles every definition it can: one that no longer compiles (a computation it read was deleted) is left out and reported. */
function compileTolerantly(specs: ComputationSpec[], onError: (error: unknown) => void): EngageModel {
  try {
    return EngageModel.compile(specs);
  } catch (error) {
    if (!(error instanceof DefinitionError)) throw error;
  }
  const kept: ComputationSpec[] = [];
  for (const spec of specs) {
    try {
      EngageModel.compile([...kept, spec]);
      kept.push(spec);
    } catch (error) {
      onError(new Error(`computation ${spec.id} (${spec.key}) is not evaluated: ${(error as Error).message}`));
    }
  }
  return EngageModel.compile(kept);
}

function toSpec(c: ComputationRecord): ComputationSpec {
  return { id: c.id, kind: c.kind, key: c.key, definition: c.definition };
}


/** Accepted and filtered Tracking API messages of the Engage types; not Engage's own syncs, not suppressed ones. */
function engageMessageOf(stored: StoredMessage): ParsedMessage | undefined {
  if (stored.status !== 'accepted' && stored.status !== 'filtered') return undefined;
  if (stored.type === undefined || !ENGAGE_TYPES.has(stored.type)) return undefined;
  if (stored.status === 'accepted' && stored.reason?.startsWith(SYNC_REASON_PREFIX) === true) return undefined;
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(stored.body) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const identifiers: string[] = [];
  const userId = idOf(body['userId']);
  const anonymousId = idOf(body['anonymousId']);
  if (userId !== undefined) identifiers.push(`user_id:${userId}`);
  if (anonymousId !== undefined) identifiers.push(`anonymous_id:${anonymousId}`);
  const previousId = stored.type === 'alias' ? idOf(body['previousId']) : undefined;
  const previous = previousId === undefined ? [] : [`user_id:${previousId}`, `anonymous_id:${previousId}`];
  if (identifiers.length === 0 && previous.length === 0) return undefined;
  const parsedTime = typeof body['timestamp'] === 'string' ? Date.parse(body['timestamp']) : Number.NaN;
  const engage: EngageMessage = {
    type: stored.type as EngageMessage['type'],
    ...(typeof body['event'] === 'string' ? { event: body['event'] } : {}),
    ...(isObject(body['properties']) ? { properties: body['properties'] } : {}),
    ...(isObject(body['traits']) ? { traits: body['traits'] } : {}),
    timestamp: Number.isFinite(parsedTime) ? parsedTime : stored.receivedAt,
  };
  return { engage, identifiers, previous };
}

/** `parsed`: the message as {@link engageMessageOf} read it, when it already did. */
function identifiersOf(stored: StoredMessage, parsed = engageMessageOf(stored)): string[] {
  if (stored.type === 'delete' && stored.userId !== undefined) return [`user_id:${stored.userId}`];
  return parsed === undefined ? [] : [...parsed.identifiers, ...parsed.previous];
}

function idOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value.length > 0) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
