import type { IngestEntry } from './records.js';

/** The Engage records of the `Store` contract (`store.ts`): computations, profiles and the evaluator's commits. */
export type ComputationKind = 'trait' | 'audience';

export type ComputationStatus = 'computing' | 'live';

export interface ComputationRecord {
  readonly id: string;
  readonly kind: ComputationKind;
  readonly name: string;
  readonly key: string;
  readonly definition: unknown;
  /** Source ids whose Webhooks destination receives the syncs. */
  readonly destinations: readonly string[];
  readonly status: ComputationStatus;
  /** Bumped on each definition change; the evaluator marks a version live. */
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Members of an audience; set by listings and reads (a trait has no size: its values are kept on the profiles). */
  readonly size?: number;
}

export interface ComputationPatch {
  readonly name?: string | undefined;
  readonly definition?: unknown;
  readonly destinations?: readonly string[] | undefined;
}

export interface ComputationMember {
  readonly profileId: string;
  readonly identifiers: readonly string[];
  readonly value: unknown;
  /** When the profile joined (ms): members are listed in this order, then by profile id. */
  readonly since: number;
}

export interface ProfileRecord {
  readonly id: string;
  /** ProfileState as JSON text (see src/domain/engage). */
  readonly state: string;
  readonly version: number;
  readonly identifiers: readonly string[];
  /**
   * Stored outputs by computation id: `true` for the audiences the profile is
   * in (a member row each), the value of each computed trait that has one
   * (kept on the profile row itself).
   */
  readonly outputs: Readonly<Record<string, unknown>>;
  /** Seqs of its latest messages, newest first (bounded). */
  readonly recentSeqs: readonly number[];
  readonly nextExpiry: number | undefined;
  readonly updatedAt: number;
}

export interface ProfileWrite {
  readonly id: string;
  /** 0: a new profile. */
  readonly expectedVersion: number;
  readonly state: string;
  /** Identifiers to add to the profile (moved here from any other profile); those it has stay. */
  readonly identifiers: readonly string[];
  /** Changed audience memberships: a member row to add (true) or remove (false). */
  readonly membershipChanges: ReadonlyArray<{ readonly computationId: string; readonly member: boolean }>;
  /** The profile's computed trait values by computation id, all of them (stored with the profile, replacing those stored). */
  readonly computedTraits: Readonly<Record<string, unknown>>;
  readonly recentSeqs: readonly number[];
  readonly nextExpiry: number | undefined;
}

export interface EngageBatch {
  /**
   * Moves the stream cursor, conditionally (the lease holder's fence), and
   * only while no regulation step ran since `erasures` was read with it (see
   * EngageStore.getEngageStreamPosition).
   */
  readonly cursor?: { readonly from: number; readonly to: number; readonly erasures: number } | undefined;
  readonly deletedProfiles: ReadonlyArray<{ readonly id: string; readonly expectedVersion: number }>;
  readonly profiles: readonly ProfileWrite[];
  /** Sync identify messages, accepted, with their destinations. */
  readonly messages: readonly IngestEntry[];
  /**
   * The computations whose member rows or syncs this commit writes, at the
   * version they were computed for: the commit is refused when one was
   * deleted or redefined meanwhile (so a deleted audience gets no rows and
   * no syncs after its delete).
   */
  readonly computations?: ReadonlyArray<{ readonly id: string; readonly version: number }> | undefined;
  /** Computations whose first sync this commit completes: `live` if still at that version. */
  readonly computationsLive?: ReadonlyArray<{ readonly id: string; readonly version: number }> | undefined;
  readonly at: number;
}
