import type { Database, Statement } from 'better-sqlite3';
import {
  type ComputationRow,
  EngageConflict,
  type OutputRow,
  type ProfileRow,
  toComputationRecord,
  toProfileRecord,
} from '../engage-rows.js';
import { type MessageRow, toStoredMessage } from '../rows.js';
import type {
  ComputationKind,
  ComputationMember,
  ComputationPatch,
  ComputationRecord,
  EngageBatch,
  ProfileRecord,
  StoredMessage,
} from '../store.js';
import type { MessageQueries } from './message-queries.js';
import { PARKED_AT, type SyncChain, cancelledSyncReason, orderedSyncOf, syncChainsOf } from '../engage-sync-chain.js';

const WITH_SIZE = `SELECT c.*, (SELECT COUNT(*) FROM profile_outputs o WHERE o.computation_id = c.id) AS size FROM computations c`;

/** Engage's tables: computations, profiles with their identifiers and audience memberships, and the evaluator's cursor and lease. */
export class EngageQueries {
  private readonly commitTx: (batch: EngageBatch) => void;
  /** Prepared once each: preparing costs more than running most of these. */
  private readonly statements = new Map<string, Statement>();

  constructor(
    private readonly db: Database,
    private readonly messages: MessageQueries,
  ) {
    this.commitTx = db.transaction((batch: EngageBatch) => this.commitIn(batch));
  }

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  insertComputation(c: ComputationRecord): boolean {
    const result = this.prepare(`
        INSERT INTO computations (id, kind, name, key, definition, destinations, status, version, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`)
      .run(c.id, c.kind, c.name, c.key, JSON.stringify(c.definition), JSON.stringify(c.destinations), c.status, c.version, c.createdAt, c.updatedAt);
    return result.changes > 0;
  }

  listComputations(kind: ComputationKind | undefined, sizes: boolean): ComputationRecord[] {
    const select = sizes ? WITH_SIZE : 'SELECT c.* FROM computations c';
    const rows =
      kind === undefined
        ? (this.prepare(`${select} ORDER BY c.created_at, c.id`).all() as ComputationRow[])
        : (this.prepare(`${select} WHERE c.kind = ? ORDER BY c.created_at, c.id`).all(kind) as ComputationRow[]);
    return rows.map(toComputationRecord);
  }

  getComputation(id: string): ComputationRecord | undefined {
    const row = this.prepare(`${WITH_SIZE} WHERE c.id = ?`).get(id) as ComputationRow | undefined;
    return row === undefined ? undefined : toComputationRecord(row);
  }

  updateComputation(id: string, patch: ComputationPatch, at: number): ComputationRecord | undefined {
    const redefine = patch.definition !== undefined;
    this.prepare(`
        UPDATE computations SET name = COALESCE(?, name), definition = COALESCE(?, definition),
          destinations = COALESCE(?, destinations),
          status = CASE WHEN ? THEN 'computing' ELSE status END,
          version = version + CASE WHEN ? THEN 1 ELSE 0 END, updated_at = ?
        WHERE id = ?`)
      .run(
        patch.name ?? null,
        redefine ? JSON.stringify(patch.definition) : null,
        patch.destinations === undefined ? null : JSON.stringify(patch.destinations),
        redefine ? 1 : 0,
        redefine ? 1 : 0,
        at,
        id,
      );
    return this.getComputation(id);
  }

  deleteComputation(id: string): boolean {
    return this.db.transaction(() => {
      const deleted = this.prepare('DELETE FROM computations WHERE id = ? RETURNING kind').get(id) as { kind: string } | undefined;
      if (deleted === undefined) return false;
      this.prepare('DELETE FROM profile_outputs WHERE computation_id = ?').run(id);
      // Its syncs not sent yet are never sent. On a sync chain (sync_key):
      // gone (one in flight ends without a retry: its row is gone).
      const unsent = `SELECT id FROM deliveries WHERE sync_computation_id = ? AND sync_key IS NOT NULL AND status = 'pending'`;
      this.prepare(`DELETE FROM delivery_attempts WHERE delivery_id IN (${unsent})`).run(id);
      this.prepare(`DELETE FROM deliveries WHERE id IN (${unsent})`).run(id);
      // In an ordered key's chain: cancelled where they wait, so that what
      // waits behind them goes on in order once they end (failed, unsent).
      this.prepare(`UPDATE deliveries SET cancelled = ? WHERE sync_computation_id = ? AND sync_key IS NULL AND status IN ('pending', 'transforming')`).run(cancelledSyncReason(deleted.kind), id);
      return true;
    })();
  }

  /** In join order, on the index profile_outputs_by_join; `after` undefined: from the first (every since is ≥ 0). */
  listMembers(computationId: string, limit: number, after: Pick<ComputationMember, 'since' | 'profileId'> | undefined): ComputationMember[] {
    const rows = this.prepare(`SELECT * FROM profile_outputs WHERE computation_id = ? AND (since, profile_id) > (?, ?) ORDER BY since, profile_id LIMIT ?`)
      .all(computationId, after?.since ?? -1, after?.profileId ?? '', limit) as OutputRow[];
    const identifiers = this.identifiersOf(rows.map((r) => r.profile_id));
    return rows.map((row) => ({
      profileId: row.profile_id,
      identifiers: [...(identifiers.get(row.profile_id) ?? [])].sort(),
      value: JSON.parse(row.value) as unknown,
      since: row.since,
    }));
  }

  findProfileIds(identifiers: readonly string[]): Map<string, string> {
    const found = new Map<string, string>();
    if (identifiers.length === 0) return found;
    const rows = this.prepare(`SELECT identifier, profile_id FROM profile_identifiers WHERE identifier IN (SELECT value FROM json_each(?))`)
      .all(JSON.stringify(identifiers)) as Array<{ identifier: string; profile_id: string }>;
    for (const row of rows) found.set(row.identifier, row.profile_id);
    return found;
  }

  getProfiles(ids: readonly string[]): ProfileRecord[] {
    if (ids.length === 0) return [];
    const list = JSON.stringify(ids);
    const rows = this.prepare(`SELECT * FROM profiles WHERE id IN (SELECT value FROM json_each(?))`).all(list) as ProfileRow[];
    const identifiers = this.identifiersOf(ids);
    const memberships = new Map<string, OutputRow[]>();
    const memberRows = this.prepare(`SELECT * FROM profile_outputs WHERE profile_id IN (SELECT value FROM json_each(?))`)
      .all(list) as OutputRow[];
    for (const row of memberRows) {
      const held = memberships.get(row.profile_id);
      if (held === undefined) memberships.set(row.profile_id, [row]);
      else held.push(row);
    }
    return rows.map((row) => toProfileRecord(row, identifiers.get(row.id) ?? [], memberships.get(row.id) ?? []));
  }

  private identifiersOf(ids: readonly string[]): Map<string, string[]> {
    const byProfile = new Map<string, string[]>();
    if (ids.length === 0) return byProfile;
    const rows = this.prepare(`SELECT identifier, profile_id FROM profile_identifiers WHERE profile_id IN (SELECT value FROM json_each(?))`)
      .all(JSON.stringify(ids)) as Array<{ identifier: string; profile_id: string }>;
    // Appended in place: copying the list per row made a profile of n identifiers cost n² (issue 29).
    for (const row of rows) {
      const list = byProfile.get(row.profile_id);
      if (list === undefined) byProfile.set(row.profile_id, [row.identifier]);
      else list.push(row.identifier);
    }
    return byProfile;
  }

  listExpiredProfileIds(now: number, limit: number): string[] {
    return this.prepare(`SELECT id FROM profiles WHERE next_expiry IS NOT NULL AND next_expiry <= ? ORDER BY next_expiry LIMIT ?`)
      .pluck()
      .all(now, limit) as string[];
  }

  listProfileIds(afterId: string, limit: number): string[] {
    return this.prepare(`SELECT id FROM profiles WHERE id > ? ORDER BY id LIMIT ?`).pluck().all(afterId, limit) as string[];
  }

  listMessagesSince(afterSeq: number, limit: number, uptoSeq: number | undefined): StoredMessage[] {
    const rows = this.prepare(`SELECT * FROM messages WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`)
      .all(afterSeq, uptoSeq ?? Number.MAX_SAFE_INTEGER, limit) as MessageRow[];
    return rows.map(toStoredMessage);
  }

  getMessagesBySeq(seqs: readonly number[]): StoredMessage[] {
    if (seqs.length === 0) return [];
    const rows = this.prepare(`SELECT * FROM messages WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq DESC`)
      .all(JSON.stringify(seqs)) as MessageRow[];
    return rows.map(toStoredMessage);
  }

  getCursor(): number {
    return this.prepare(`SELECT cursor_seq FROM engage_state WHERE id = 1`).pluck().get() as number;
  }

  getStreamPosition(): { cursor: number; erasures: number } {
    const row = this.prepare(`SELECT cursor_seq, erasures FROM engage_state WHERE id = 1`).get() as { cursor_seq: number; erasures: number };
    return { cursor: row.cursor_seq, erasures: row.erasures };
  }

  /** See Store.oldestUnevaluatedMessage: one seek along the primary key, just past the cursor. */
  oldestUnevaluated(): { seq: number; receivedAt: number } | undefined {
    const row = this.prepare(`SELECT seq, received_at FROM messages WHERE seq > (SELECT cursor_seq FROM engage_state WHERE id = 1) ORDER BY seq LIMIT 1`).get() as
      | { seq: number; received_at: number }
      | undefined;
    return row === undefined ? undefined : { seq: row.seq, receivedAt: row.received_at };
  }

  claimLease(owner: string, now: number, ttlMs: number): boolean {
    return (
      this.prepare(`UPDATE engage_state SET lease_owner = ?, lease_expires_at = ? WHERE id = 1 AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at < ?)`)
        .run(owner, now + ttlMs, owner, now).changes > 0
    );
  }

  releaseLease(owner: string): void {
    this.prepare(`UPDATE engage_state SET lease_owner = NULL, lease_expires_at = 0 WHERE id = 1 AND lease_owner = ?`).run(owner);
  }

  /** Whether a lease held by another owner than `keepOwner` was freed. */
  releaseOtherLease(keepOwner: string): boolean {
    return (
      this.prepare(`UPDATE engage_state SET lease_owner = NULL, lease_expires_at = 0 WHERE id = 1 AND lease_owner IS NOT NULL AND lease_owner <> ?`).run(keepOwner)
        .changes > 0
    );
  }

  /**
   * Drops the chain's pending deliveries that are not in flight (see
   * engage-sync-chain.ts); resolves whether one is still in flight (besides `except`).
   */
  private supersede(computationId: string, key: string, now: number, except = -1): boolean {
    const stale = `SELECT id FROM deliveries WHERE sync_computation_id = ? AND sync_key = ? AND status = 'pending'
      AND (lease_owner IS NULL OR next_attempt_at <= ?) AND id <> ?`;
    this.prepare(`DELETE FROM delivery_attempts WHERE delivery_id IN (${stale})`).run(computationId, key, now, except);
    this.prepare(`DELETE FROM deliveries WHERE id IN (${stale})`).run(computationId, key, now, except);
    return (
      this.prepare(`SELECT 1 FROM deliveries WHERE sync_computation_id = ? AND sync_key = ? AND status = 'pending' AND id <> ? LIMIT 1`)
        .pluck()
        .get(computationId, key, except) !== undefined
    );
  }

  /** Whether any delivery is parked (a read: the release takes the write lock only then). */
  hasParkedSyncs(): boolean {
    return this.prepare(`SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at >= ? LIMIT 1`).pluck().get(PARKED_AT) !== undefined;
  }

  /** See Store.releaseEngageSyncs. */
  releaseSyncs(now: number, limit: number): { released: number; parked: number } {
    return this.db.transaction(() => {
      const parked = this.prepare(`SELECT id, sync_computation_id, sync_key FROM deliveries WHERE status = 'pending' AND next_attempt_at >= ? ORDER BY next_attempt_at LIMIT ?`)
        .all(PARKED_AT, limit) as Array<{ id: number; sync_computation_id: string | null; sync_key: string | null }>;
      let released = 0;
      for (const row of parked) {
        if (row.sync_computation_id === null || row.sync_key === null) continue;
        if (this.supersede(row.sync_computation_id, row.sync_key, now, row.id)) continue;
        this.prepare(`UPDATE deliveries SET next_attempt_at = ?, updated_at = ? WHERE id = ?`).run(now, now, row.id);
        released++;
      }
      return { released, parked: parked.length - released };
    }).immediate();
  }

  /** Resolves false when a condition failed (nothing written). */
  commit(batch: EngageBatch): boolean {
    try {
      this.commitTx(batch);
      return true;
    } catch (error) {
      if (error instanceof EngageConflict) return false;
      throw error;
    }
  }

  private commitIn(batch: EngageBatch): void {
    for (const computation of batch.computations ?? []) {
      if (this.prepare(`SELECT 1 FROM computations WHERE id = ? AND version = ?`).get(computation.id, computation.version) === undefined) {
        throw new EngageConflict(`computation ${computation.id} deleted or changed`);
      }
    }
    if (batch.cursor !== undefined) {
      const moved = this.prepare(`UPDATE engage_state SET cursor_seq = ? WHERE id = 1 AND cursor_seq = ? AND erasures = ?`).run(batch.cursor.to, batch.cursor.from, batch.cursor.erasures);
      if (moved.changes === 0) throw new EngageConflict('cursor moved, or users were erased');
    }
    for (const gone of batch.deletedProfiles) {
      if (this.prepare(`DELETE FROM profiles WHERE id = ? AND version = ?`).run(gone.id, gone.expectedVersion).changes === 0) {
        throw new EngageConflict(`profile ${gone.id} changed`);
      }
      this.prepare(`DELETE FROM profile_identifiers WHERE profile_id = ?`).run(gone.id);
      this.prepare(`DELETE FROM profile_outputs WHERE profile_id = ?`).run(gone.id);
    }
    const upsertIdentifier = this.prepare(`
      INSERT INTO profile_identifiers (identifier, profile_id) VALUES (?, ?)
      ON CONFLICT (identifier) DO UPDATE SET profile_id = excluded.profile_id`);
    const addMember = this.prepare(`
      INSERT INTO profile_outputs (computation_id, profile_id, value, since) VALUES (?, ?, 'true', ?)
      ON CONFLICT (computation_id, profile_id) DO NOTHING`);
    const removeMember = this.prepare(`DELETE FROM profile_outputs WHERE computation_id = ? AND profile_id = ?`);
    for (const profile of batch.profiles) {
      const recent = JSON.stringify(profile.recentSeqs);
      const next = profile.nextExpiry ?? null;
      const traits = JSON.stringify(profile.computedTraits);
      if (profile.expectedVersion === 0) {
        const inserted = this.prepare(`
            INSERT INTO profiles (id, version, next_expiry, updated_at, recent_seqs, computed_traits, state)
            VALUES (?, 1, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`)
          .run(profile.id, next, batch.at, recent, traits, profile.state);
        if (inserted.changes === 0) throw new EngageConflict(`profile ${profile.id} exists`);
      } else {
        const updated = this.prepare(`
            UPDATE profiles SET version = version + 1, next_expiry = ?, updated_at = ?, recent_seqs = ?, computed_traits = ?, state = ?
            WHERE id = ? AND version = ?`)
          .run(next, batch.at, recent, traits, profile.state, profile.id, profile.expectedVersion);
        if (updated.changes === 0) throw new EngageConflict(`profile ${profile.id} changed`);
      }
      for (const identifier of profile.identifiers) upsertIdentifier.run(identifier, profile.id);
      for (const change of profile.membershipChanges) {
        if (change.member) addMember.run(change.computationId, profile.id, batch.at);
        else removeMember.run(change.computationId, profile.id);
      }
    }
    const chains = new Map<number, SyncChain[]>();
    for (const chain of syncChainsOf(batch.messages)) chains.set(chain.index, [...(chains.get(chain.index) ?? []), chain]);
    batch.messages.forEach((entry, index) => {
      const own = chains.get(index) ?? [];
      const parked = own.map((chain) => this.supersede(chain.computationId, chain.key, batch.at));
      const seq = this.messages.insert(entry, 'accepted');
      own.forEach((chain, i) => {
        this.prepare(`UPDATE deliveries SET sync_computation_id = ?, sync_key = ?, next_attempt_at = CASE WHEN ? THEN ? ELSE next_attempt_at END WHERE message_seq = ? AND destination = ?`)
          .run(chain.computationId, chain.key, parked[i] === true ? 1 : 0, PARKED_AT, seq, chain.destination);
      });
      const orderedSync = orderedSyncOf(entry);
      if (orderedSync !== undefined) this.prepare(`UPDATE deliveries SET sync_computation_id = ? WHERE message_seq = ? AND destination = 'webhooks'`).run(orderedSync, seq);
    });
    for (const live of batch.computationsLive ?? []) {
      const marked = this.prepare(`UPDATE computations SET status = 'live', updated_at = ? WHERE id = ? AND version = ?`).run(batch.at, live.id, live.version);
      if (marked.changes === 0) throw new EngageConflict('computation changed');
    }
  }
}
