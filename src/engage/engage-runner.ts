import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ProfileState } from '../domain/engage/index.js';
import { storedId } from '../domain/normalize.js';
import { regulationEffects } from '../domain/regulation.js';
import type { ComputationRecord, EngageBatch, IngestEntry, Store } from '../store/store.js';
import type { Tracing } from '../telemetry/tracing.js';
import { compileDefinitions } from './engage-definitions.js';
import { engageMessageOf, identifiersOf } from './engage-messages.js';
import { EngagePacing } from './engage-pacing.js';
import { ProfileCache } from './profile-cache.js';
import { type Definitions, ProfileSet, RECENT_EVENTS, type Working } from './profile-set.js';
import { lastSyncPerChain } from './sync-chains.js';
import { SyncMessages, syncTargetsOf } from './sync-messages.js';
import { traceSyncs } from './sync-spans.js';

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
 * the stream is read only up to the settled seq (see
 * `Store.settledMessageSeq`). While writers running now may settle more,
 * the evaluator looks again this soon.
 */
const SETTLING_POLL_MS = 50;
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
  private readonly erasedRegulations = new Set<string>();
  private reloadAfter = 0;
  private gathering: NodeJS.Timeout | undefined;
  private leaseUntil = 0;
  /** Whether the first pass freed a lease left by a dead run (single-node stores), or found none to free. */
  private staleLeaseReleased = false;
  /** Whether the last stream page read was full (more was waiting). */
  private behind = false;
  /** The rest after each pass: how much of its thread Engage takes. */
  private readonly pacing = new EngagePacing();
  /** Whether parked syncs may be waiting (see engage-sync-chain.ts): at start, some may be left from before. */
  private parkedMaybe = true;
  /** Only right while this node holds the lease without a break and its commits succeed. */
  private readonly cache = new ProfileCache(CACHE_BYTES);
  /** Makes the identify messages of output changes. */
  private readonly syncs: SyncMessages;

  constructor(private readonly options: EngageRunnerOptions) {
    this.owner = options.owner ?? `engage-${randomUUID()}`;
    this.syncs = new SyncMessages(options.newMessageId);
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
          const pass = this.pacing.startPass();
          worked = await this.pass();
          if (worked) await this.pacing.restAfterWork(pass, this.behind);
          else await this.pacing.restCaughtUp();
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
        // Read the definitions again before the next pass: the ones held still say `computing` for what the
        // backfill just made live (or it stopped because one changed), and a pass on them would backfill
        // again and send every member its identify again, once a pass until the next reload.
        this.reloadAfter = 0;
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
      this.definitions = compileDefinitions(computations, syncTargets, this.options.now(), this.options.onError);
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
    // Read before the page: a regulation step that erases users after this counts, and refuses the page's commit.
    const { cursor, erasures } = await store.getEngageStreamPosition();
    const settled = await store.settledMessageSeq();
    if (settled.settling) this.schedule(SETTLING_POLL_MS);
    const page = await store.listMessagesSince(cursor, PAGE, settled.seq);
    this.behind = page.length === PAGE;
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
        await work.erase(`user_id:${storedId(stored.userId)}`);
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
    const batch: EngageBatch = { cursor: { from: cursor, to: page[page.length - 1]!.seq, erasures }, ...work.toBatch(), messages, at };
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
      messages.push(...this.syncs.syncsFor(definitions, profile, profile.current, after, profile.resend, profile.lostMemberships, at));
      profile.current = after;
      profile.resend = false;
      profile.lostMemberships = [];
    }
    applied.clear();
    return messages;
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
      messages.push(...this.syncs.syncsFor(definitions, profile, profile.current, after, false, [], at));
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
        messages.push(...this.syncs.syncsFor(definitions, profile, before, after, false, [], at, only));
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
    const regulations = await store.listRegulations({ limit: REGULATIONS_PER_PASS, sources: 0 });
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
}
