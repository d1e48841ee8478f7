import type { Outputs, ProfileState } from '../domain/engage/index.js';

/** A profile as this node last committed (or read) it. */
export interface CachedProfile {
  readonly id: string;
  /** The version the store holds for it: the next write is checked against it. */
  readonly version: number;
  /** Parsed and pruned; the evaluator changes it in place only inside a page it then commits. */
  readonly state: ProfileState;
  readonly identifiers: readonly string[];
  /** Output rows as stored, by computation id. */
  readonly storedRows: Readonly<Record<string, unknown>>;
  /** The outputs last synced (or stored). */
  readonly current: Outputs;
  readonly recentSeqs: readonly number[];
  /** Length of the state's JSON as read or last written. */
  readonly stateBytes: number;
}

/**
 * The profiles the evaluator touched lately, parsed, so that a page of
 * messages for known users neither reads nor parses them again: only the
 * writes go to the store.
 *
 * It is only ever right while this node holds the Engage lease without a
 * break and every commit succeeds: the runner empties it when the lease
 * lapses or is lost, when a commit is refused (a version or the cursor
 * moved: someone else wrote) or fails, and when the definitions change.
 * Every write still carries the version it read, so a stale entry can cost
 * a refused commit but never a lost update. Bounded by the estimated
 * memory of what it holds; the least recently used go first.
 */
export class ProfileCache {
  private readonly byId = new Map<string, CachedProfile>();
  /** identifier → id of the cached profile that has it. */
  private readonly owners = new Map<string, string>();
  private bytes = 0;

  constructor(private readonly budgetBytes: number) {}

  get size(): number {
    return this.byId.size;
  }

  /** The cached profile, marked as used now. */
  get(id: string): CachedProfile | undefined {
    const entry = this.byId.get(id);
    if (entry === undefined) return undefined;
    this.byId.delete(id);
    this.byId.set(id, entry);
    return entry;
  }

  /** The id of the cached profile that has this identifier (undefined: ask the store). */
  ownerOf(identifier: string): string | undefined {
    return this.owners.get(identifier);
  }

  put(entry: CachedProfile): void {
    this.remove(entry.id);
    this.byId.set(entry.id, entry);
    this.bytes += memoryOf(entry);
    for (const identifier of entry.identifiers) this.owners.set(identifier, entry.id);
    for (const [oldest] of this.byId) {
      if (this.bytes <= this.budgetBytes || this.byId.size <= 1) break;
      this.remove(oldest);
    }
  }

  remove(id: string): void {
    const entry = this.byId.get(id);
    if (entry === undefined) return;
    this.byId.delete(id);
    this.bytes -= memoryOf(entry);
    for (const identifier of entry.identifiers) if (this.owners.get(identifier) === id) this.owners.delete(identifier);
  }

  clear(): void {
    this.byId.clear();
    this.owners.clear();
    this.bytes = 0;
  }
}

/**
 * Rough bytes a cached profile takes: its parsed state about twice its JSON,
 * plus its identifiers, outputs and bookkeeping (about a kilobyte even for
 * an empty state).
 */
function memoryOf(entry: CachedProfile): number {
  return 2 * entry.stateBytes + 1_024;
}
