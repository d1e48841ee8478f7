import { randomUUID } from 'node:crypto';
import {
  type EngageMessage,
  type EngageModel,
  IdentifierCounts,
  type Outputs,
  type ProfileState,
  emptyProfileState,
  mergeProfileStates,
} from '../domain/engage/index.js';
import type { FunctionTarget } from '../domain/routing.js';
import type { ComputationRecord, EngageBatch, ProfileRecord, ProfileWrite, Store, StoredMessage } from '../store/store.js';
import type { ProfileCache } from './profile-cache.js';

/** Seqs of a profile's latest messages kept for `GET /profiles/:id/events`. */
export const RECENT_EVENTS = 50;

/** A stored message Engage applies: its parsed form and the profile identifiers it names. */
export interface ParsedMessage {
  readonly engage: EngageMessage;
  readonly identifiers: string[];
  /** alias: the identifier candidates of previousId, user id first. */
  readonly previous: string[];
}

/** A profile being changed in memory before one commit. */
export interface WorkingProfile {
  readonly id: string;
  /** 0: not stored yet. */
  readonly expectedVersion: number;
  state: ProfileState;
  readonly identifiers: Set<string>;
  /** Those already stored for it (not written again). */
  readonly storedIdentifiers: ReadonlySet<string>;
  /** Outputs as stored when loaded, by computation id: audience memberships (true) and computed trait values. */
  readonly storedRows: Readonly<Record<string, unknown>>;
  /** The outputs last synced (or stored), to diff the next evaluation against. */
  current: Outputs;
  recentSeqs: number[];
  dirty: boolean;
  /** Length of the state's JSON as read or last written (the cache's measure). */
  bytes: number;
}

/** What the computations are, compiled, with what their syncs need. */
export interface Definitions {
  readonly model: EngageModel;
  readonly byId: ReadonlyMap<string, ComputationRecord>;
  /** Outputs of a profile with no events and no traits: what a missing stored output stands for. */
  readonly baseline: Outputs;
  /** What a profile without stored outputs was last sent: the baseline, but in no audience. */
  readonly unsent: Outputs;
  /** Where a source's identify syncs go: sources with an enabled Webhooks destination or enabled function destinations. */
  readonly syncTargets: ReadonlyMap<string, SyncTargets>;
}

/** A source's destinations that get Engage's identify syncs. */
export interface SyncTargets {
  /** Its Webhooks destination when enabled, with whether it orders per user. */
  readonly webhooks: { readonly ordered: boolean } | undefined;
  /** Its enabled function destinations, oldest first. */
  readonly functions: readonly FunctionTarget[];
}

export function firstIdentifier(profile: WorkingProfile, prefix: string): string | undefined {
  const values = [...profile.identifiers].filter((i) => i.startsWith(prefix)).sort();
  return values[0]?.slice(prefix.length);
}

/** The row a value is stored as: audiences only their members, traits only a value. */
function rowValue(computation: ComputationRecord | undefined, value: unknown): unknown {
  if (computation === undefined) return undefined;
  if (computation.kind === 'audience') return value === true ? true : undefined;
  return value === undefined || value === null ? undefined : value;
}

/** `resend`: it merged or gained a user id, so its memberships and values go again. */
export type Working = WorkingProfile & { resend: boolean; lostMemberships: string[] };

/** The outputs last sent to a profile with these stored outputs (what a missing one stands for comes from `unsent`). */
function currentOf(definitions: Definitions, storedRows: Readonly<Record<string, unknown>>): Outputs {
  const current: Outputs = { ...definitions.unsent };
  for (const id of Object.keys(storedRows)) {
    const value = storedRows[id];
    if (value !== undefined && definitions.byId.has(id)) current[id] = value;
  }
  return current;
}

/**
 * The profiles one commit changes: loaded once, resolved and merged in
 * memory, written back with their versions checked. With a cache, profiles
 * it holds are taken from it instead of the store, and {@link committed}
 * puts back what the commit wrote.
 */
export class ProfileSet {
  private readonly profiles = new Map<string, Working>();
  /** identifier → profile id, or null: known to belong to no profile. */
  private readonly owners = new Map<string, string | null>();
  private readonly deleted = new Map<string, number>();
  /** Output rows as the commit will leave them, by profile id (filled by toBatch). */
  private readonly writtenRows = new Map<string, Record<string, unknown>>();
  /** Identifiers by type of the profiles linked to in this commit (see IDENTIFIER_LIMITS). */
  private readonly counts = new WeakMap<Working, IdentifierCounts>();

  constructor(
    private readonly store: Store,
    private readonly definitions: Definitions,
    private readonly at: number,
    private readonly cache?: ProfileCache,
  ) {}

  /** Looks up the owners of these identifiers and loads their profiles. */
  async preload(identifiers: string[]): Promise<void> {
    const unknown = [...new Set(identifiers)].filter((i) => !this.owners.has(i));
    if (unknown.length === 0) return;
    const cached = new Set<string>();
    const ask: string[] = [];
    for (const identifier of unknown) {
      const owner = this.cache?.ownerOf(identifier);
      if (owner === undefined) ask.push(identifier);
      else {
        this.owners.set(identifier, owner);
        cached.add(owner);
      }
    }
    const found = ask.length === 0 ? new Map<string, string>() : await this.store.findProfileIds(ask);
    for (const identifier of ask) this.owners.set(identifier, found.get(identifier) ?? null);
    await this.load([...new Set([...cached, ...found.values()])]);
  }

  async load(ids: readonly string[]): Promise<Working[]> {
    const missing: string[] = [];
    for (const id of ids) {
      if (this.profiles.has(id) || this.deleted.has(id)) continue;
      const entry = this.cache?.get(id);
      if (entry === undefined) missing.push(id);
      else this.adopt(entry, entry.state, entry.stateBytes, entry.storedRows, entry.current);
    }
    for (const record of await this.store.getProfiles(missing)) this.add(record);
    return ids.map((id) => this.profiles.get(id)).filter((p): p is Working => p !== undefined);
  }

  private add(record: ProfileRecord): Working {
    const storedRows: Record<string, unknown> = { ...record.outputs };
    return this.adopt(record, JSON.parse(record.state) as ProfileState, record.state.length, storedRows, currentOf(this.definitions, storedRows));
  }

  private adopt(
    record: { readonly id: string; readonly version: number; readonly identifiers: readonly string[]; readonly recentSeqs: readonly number[] },
    state: ProfileState,
    bytes: number,
    storedRows: Readonly<Record<string, unknown>>,
    current: Outputs,
  ): Working {
    const profile: Working = {
      id: record.id,
      expectedVersion: record.version,
      state,
      identifiers: new Set(record.identifiers),
      storedIdentifiers: new Set(record.identifiers),
      storedRows,
      current: { ...current },
      recentSeqs: [...record.recentSeqs],
      dirty: false,
      bytes,
      resend: false,
      lostMemberships: [],
    };
    this.profiles.set(profile.id, profile);
    for (const identifier of record.identifiers) this.owners.set(identifier, record.id);
    return profile;
  }

  /** Whether this profile is still one this commit writes (not merged into another, not erased). */
  holds(profile: Working): boolean {
    return this.profiles.get(profile.id) === profile;
  }

  private async ownerOf(identifier: string): Promise<string | undefined> {
    if (!this.owners.has(identifier)) await this.preload([identifier]);
    return this.owners.get(identifier) ?? undefined;
  }

  /**
   * The profile a message belongs to: its identifiers' profile, a new one,
   * or several merged into one (the first named keeps its id).
   */
  async resolve(stored: StoredMessage, message: ParsedMessage): Promise<Working> {
    const names = [...message.identifiers];
    if (message.previous.length > 0) {
      // alias: previousId is a user id when some profile has it, else an anonymous id.
      const [asUser, asAnonymous] = message.previous as [string, string];
      names.push((await this.ownerOf(asUser)) !== undefined ? asUser : asAnonymous);
    }
    const ids: string[] = [];
    for (const name of names) {
      const owner = await this.ownerOf(name);
      if (owner !== undefined && !ids.includes(owner)) ids.push(owner);
    }
    let profile: Working;
    if (ids.length === 0) {
      profile = {
        id: `prf_${stored.seq}_${randomUUID().slice(0, 8)}`,
        expectedVersion: 0,
        state: JSONclone(emptyProfileState()),
        identifiers: new Set(),
        storedIdentifiers: new Set(),
        storedRows: {},
        current: { ...this.definitions.unsent },
        recentSeqs: [],
        dirty: true,
        bytes: 0,
        resend: false,
        lostMemberships: [],
      };
      this.profiles.set(profile.id, profile);
    } else {
      profile = this.profiles.get(ids[0]!)!;
      for (const otherId of ids.slice(1)) this.mergeInto(profile, this.profiles.get(otherId)!);
    }
    const counts = this.countsOf(profile);
    const userIdsBefore = counts.of('user_id');
    for (const name of names) {
      if (profile.identifiers.has(name)) continue;
      // Beyond its type's limit a new identifier is not linked; the message still counts here.
      if (!counts.take(name)) continue;
      profile.identifiers.add(name);
      this.owners.set(name, profile.id);
    }
    // Gaining a user id (its first, or one more: `alias yan → bob`): its
    // memberships and values go again, so the new id gets them too.
    if (counts.of('user_id') > userIdsBefore) profile.resend = true;
    return profile;
  }

  private countsOf(profile: Working): IdentifierCounts {
    let counts = this.counts.get(profile);
    if (counts === undefined) this.counts.set(profile, (counts = new IdentifierCounts(profile.identifiers)));
    return counts;
  }

  private mergeInto(survivor: Working, other: Working): void {
    survivor.state = mergeProfileStates(survivor.state, other.state);
    const counts = this.countsOf(survivor);
    for (const identifier of other.identifiers) {
      if (survivor.identifiers.has(identifier)) continue;
      if (counts.take(identifier)) {
        survivor.identifiers.add(identifier);
        this.owners.set(identifier, survivor.id);
      } else {
        // Dropped: its row goes with the merged-away profile, and no profile holds it any more.
        this.owners.set(identifier, null);
      }
    }
    // Memberships the merged-away profile held and the merged one may not: sent as false if so (the survivor's own are in the diff).
    for (const [id, value] of Object.entries(other.current)) {
      if (value === true && survivor.current[id] !== true) survivor.lostMemberships.push(id);
    }
    survivor.recentSeqs = [...survivor.recentSeqs, ...other.recentSeqs].sort((a, b) => b - a).slice(0, RECENT_EVENTS);
    survivor.resend = true;
    survivor.dirty = true;
    this.forget(other);
  }

  private forget(profile: Working): void {
    this.profiles.delete(profile.id);
    if (profile.expectedVersion > 0) this.deleted.set(profile.id, profile.expectedVersion);
  }

  /** Erases the profile an identifier names (a deletion request): no syncs are sent for it. */
  async erase(identifier: string): Promise<void> {
    const owner = await this.ownerOf(identifier);
    if (owner === undefined) return;
    const profile = this.profiles.get(owner);
    if (profile === undefined) return;
    for (const name of profile.identifiers) this.owners.set(name, null);
    this.forget(profile);
  }

  /**
   * The commit's profile part; `withOutputs` false leaves the stored outputs
   * as they are (backfill history pages). Audience members are rows of their
   * own, written only when a membership changes; computed trait values go
   * with the profile row, which is written anyway.
   */
  toBatch(withOutputs = true): Pick<EngageBatch, 'deletedProfiles' | 'profiles'> {
    const { model, byId } = this.definitions;
    const profiles: ProfileWrite[] = [];
    for (const profile of this.profiles.values()) {
      if (!profile.dirty) continue;
      model.prune(profile.state, this.at);
      const membershipChanges: Array<{ computationId: string; member: boolean }> = [];
      const computedTraits: Record<string, unknown> = {};
      const rows: Record<string, unknown> = { ...profile.storedRows };
      for (const [id, computation] of byId) {
        const row = withOutputs ? rowValue(computation, profile.current[id]) : profile.storedRows[id];
        if (computation.kind === 'trait') {
          if (row !== undefined) computedTraits[id] = row;
        } else if (row !== profile.storedRows[id]) {
          membershipChanges.push({ computationId: id, member: row === true });
        }
        if (row === undefined) delete rows[id];
        else rows[id] = row;
      }
      this.writtenRows.set(profile.id, rows);
      const state = JSON.stringify(profile.state);
      profile.bytes = state.length;
      profiles.push({
        id: profile.id,
        expectedVersion: profile.expectedVersion,
        state,
        identifiers: [...profile.identifiers].filter((i) => !profile.storedIdentifiers.has(i)),
        membershipChanges,
        computedTraits,
        recentSeqs: profile.recentSeqs,
        nextExpiry: model.nextExpiry(profile.state, this.at),
      });
    }
    return { deletedProfiles: [...this.deleted].map(([id, expectedVersion]) => ({ id, expectedVersion })), profiles };
  }

  /**
   * After {@link toBatch}'s batch committed: the cache forgets the profiles
   * it deleted and holds the others as written (a version further for those
   * written). Never call it for a commit that was refused or failed: the
   * states were changed in place and the cache must be emptied instead.
   */
  committed(): void {
    const cache = this.cache;
    if (cache === undefined) return;
    for (const id of this.deleted.keys()) cache.remove(id);
    for (const profile of this.profiles.values()) {
      const rows = this.writtenRows.get(profile.id);
      const written = profile.dirty && rows !== undefined;
      const storedRows = written ? rows : profile.storedRows;
      cache.put({
        id: profile.id,
        version: written ? profile.expectedVersion + 1 : profile.expectedVersion,
        state: profile.state,
        identifiers: [...profile.identifiers],
        storedRows,
        current: currentOf(this.definitions, storedRows),
        recentSeqs: profile.recentSeqs,
        stateBytes: profile.bytes,
      });
    }
  }
}

function JSONclone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
