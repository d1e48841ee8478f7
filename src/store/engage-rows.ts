/**
 * Rows of the Engage tables (computations, profiles, profile_identifiers,
 * profile_outputs: audience members only) as both adapters read them, and their mapping to the
 * records of the Store interface.
 */
import type { ComputationKind, ComputationRecord, ComputationStatus, ProfileRecord } from './store.js';

export interface ComputationRow {
  id: string;
  kind: ComputationKind;
  name: string;
  key: string;
  definition: string;
  destinations: string;
  status: ComputationStatus;
  version: number;
  created_at: number;
  updated_at: number;
  size?: number | null;
}

export function toComputationRecord(row: ComputationRow): ComputationRecord {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    key: row.key,
    definition: JSON.parse(row.definition) as unknown,
    destinations: JSON.parse(row.destinations) as string[],
    status: row.status,
    version: Number(row.version),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    ...(row.size === undefined || row.size === null ? {} : { size: Number(row.size) }),
  };
}

export interface ProfileRow {
  id: string;
  state: string;
  /** JSON object: computed trait values by computation id (migration 7). */
  computed_traits: string;
  version: number;
  recent_seqs: string;
  next_expiry: number | null;
  updated_at: number;
}

export interface OutputRow {
  profile_id: string;
  computation_id: string;
  value: string;
  since: number;
}

/** `memberships`: the profile's rows of profile_outputs (its audiences). */
export function toProfileRecord(row: ProfileRow, identifiers: readonly string[], memberships: readonly OutputRow[]): ProfileRecord {
  const byComputation = JSON.parse(row.computed_traits) as Record<string, unknown>;
  for (const output of memberships) byComputation[output.computation_id] = JSON.parse(output.value) as unknown;
  return {
    id: row.id,
    state: row.state,
    version: Number(row.version),
    identifiers: [...identifiers].sort(),
    outputs: byComputation,
    recentSeqs: JSON.parse(row.recent_seqs) as number[],
    nextExpiry: row.next_expiry ?? undefined,
    updatedAt: row.updated_at,
  };
}

/** Thrown inside a commit to roll it back when a condition (cursor, version) no longer holds. */
export class EngageConflict extends Error {
  constructor(what: string) {
    super(`engage commit conflict: ${what}`);
  }
}
