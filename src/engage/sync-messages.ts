import { type Outputs, diffOutputs } from '../domain/engage/index.js';
import { type FunctionTarget, functionTarget } from '../domain/routing.js';
import { ordersPerUser } from '../domain/webhook-settings.js';
import type { ComputationRecord, DestinationRecord, FunctionDestinationRecord, IngestEntry } from '../store/store.js';
import { type Definitions, type SyncTargets, type WorkingProfile, firstIdentifier } from './profile-set.js';

/** Prefix of the `reason` of the identify messages Engage stores: the evaluator skips them. */
export const SYNC_REASON_PREFIX = 'engage:';

/**
 * What Engage sends: the identify message of each output change (a
 * membership or a computed trait's value), to the Webhooks and function
 * destinations of each source a computation names, stamped with the moment
 * it was computed.
 */
export class SyncMessages {
  /** The last sync timestamp handed out (see `stamp`). */
  private lastStamp = 0;
  /** The evaluation time `lastStamp` was handed out for, and the changes (profile and computation) stamped with it. */
  private lastAt: number | undefined;
  private readonly stampedChanges = new Set<string>();

  constructor(private readonly newMessageId: () => string) {}

  /**
   * The identify messages for a profile's output changes: one per changed
   * computation with destinations, to each of those sources whose Webhooks
   * destination is enabled. `resend`: the profile gained a user id or merged,
   * so its current memberships and values go again. `computingIds`: a backfill
   * also sends the computations it computes, not yet live.
   */
  syncsFor(
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
      const stamp = this.stamp(at, `${profile.id} ${id}`);
      for (const sourceId of computation.destinations) {
        const targets = definitions.syncTargets.get(sourceId);
        if (targets === undefined) continue;
        for (const userId of receiverIds(profile)) entries.push(this.syncEntry(sourceId, computation, profile, userId, value, stamp, targets));
      }
    }
    return entries;
  }

  /**
   * The stamp of a change (`change`: its profile and computation) computed
   * at `at`: `at`, or just after the last stamp when that is not earlier.
   * Changes computed at the same `at` (one evaluation: a page, an expiry
   * pass, a backfill step) share one stamp unless the same change comes
   * twice, so a profile's stamps for one computation stay distinct and
   * increasing and do not run ahead of the clock (a stamp per change moved
   * 1 ms forward with each: 34 s ahead after a burst of 3,000 messages, so
   * a node taking over later stamped newer values earlier).
   */
  private stamp(at: number, change: string): number {
    if (at !== this.lastAt || this.stampedChanges.has(change)) {
      this.lastStamp = Math.max(at, this.lastStamp + 1);
      this.lastAt = at;
      this.stampedChanges.clear();
    }
    this.stampedChanges.add(change);
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
    const messageId = this.newMessageId();
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
      // (see engage-sync-chain.ts). Every delivery of a sync names its
      // computation, so that deleting the computation stops it.
      ...(targets.webhooks?.ordered === true && { orderKey: userId ?? anonymousId }),
      engageSync: { computationId: computation.id, key: userId !== undefined ? `u:${userId}` : `a:${anonymousId ?? ''}` },
    };
  }
}

/**
 * Where each source's syncs go: sources with an enabled Webhooks destination
 * or enabled function destinations. Syncs carry no `integrations` and skip the
 * source's filters, so every enabled one gets them.
 */
export function syncTargetsOf(destinations: readonly DestinationRecord[], functions: readonly FunctionDestinationRecord[]): Map<string, SyncTargets> {
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
