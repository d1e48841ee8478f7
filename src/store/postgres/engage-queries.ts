// Engage's tables: computations, profiles with their identifiers and audience memberships, and the evaluator's cursor and lease.
import type pg from 'pg';
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
import { insertMessages } from './message-queries.js';
import { PARKED_AT, cancelledSyncReason, orderedSyncOf, syncChainsOf } from '../engage-sync-chain.js';
import { liveBackendSql } from './change-listener.js';

type Queryable = pg.Pool | pg.ClientBase;

const WITH_SIZE = `SELECT c.*, (SELECT COUNT(*) FROM profile_outputs o WHERE o.computation_id = c.id) AS size FROM computations c`;

export async function insertComputation(pool: Queryable, c: ComputationRecord): Promise<boolean> {
  const result = await pool.query(
    `INSERT INTO computations (id, kind, name, key, definition, destinations, status, version, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
    [c.id, c.kind, c.name, c.key, JSON.stringify(c.definition), JSON.stringify(c.destinations), c.status, c.version, c.createdAt, c.updatedAt],
  );
  return (result.rowCount ?? 0) > 0;
}

export async function listComputations(pool: Queryable, kind: ComputationKind | undefined, sizes: boolean): Promise<ComputationRecord[]> {
  const select = sizes ? WITH_SIZE : 'SELECT c.* FROM computations c';
  const { rows } =
    kind === undefined
      ? await pool.query<ComputationRow>(`${select} ORDER BY c.created_at, c.id`)
      : await pool.query<ComputationRow>(`${select} WHERE c.kind = $1 ORDER BY c.created_at, c.id`, [kind]);
  return rows.map(toComputationRecord);
}

export async function getComputation(pool: Queryable, id: string): Promise<ComputationRecord | undefined> {
  const { rows } = await pool.query<ComputationRow>(`${WITH_SIZE} WHERE c.id = $1`, [id]);
  return rows[0] === undefined ? undefined : toComputationRecord(rows[0]);
}

export async function updateComputation(pool: Queryable, id: string, patch: ComputationPatch, at: number): Promise<ComputationRecord | undefined> {
  const redefine = patch.definition !== undefined;
  await pool.query(
    `UPDATE computations SET name = COALESCE($1, name), definition = COALESCE($2, definition),
       destinations = COALESCE($3, destinations),
       status = CASE WHEN $4 THEN 'computing' ELSE status END,
       version = version + CASE WHEN $4 THEN 1 ELSE 0 END, updated_at = $5
     WHERE id = $6`,
    [
      patch.name ?? null,
      redefine ? JSON.stringify(patch.definition) : null,
      patch.destinations === undefined ? null : JSON.stringify(patch.destinations),
      redefine,
      at,
      id,
    ],
  );
  return getComputation(pool, id);
}

export async function deleteComputation(client: pg.ClientBase, id: string): Promise<boolean> {
  const deleted = await client.query<{ kind: string }>('DELETE FROM computations WHERE id = $1 RETURNING kind', [id]);
  const kind = deleted.rows[0]?.kind;
  if (kind === undefined) return false;
  await client.query('DELETE FROM profile_outputs WHERE computation_id = $1', [id]);
  // Its syncs not sent yet are never sent. On a sync chain (sync_key): gone
  // (one in flight ends without a retry: its row is gone).
  await client.query(
    `WITH gone AS (DELETE FROM deliveries WHERE sync_computation_id = $1 AND sync_key IS NOT NULL AND status = 'pending' RETURNING id)
     DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM gone)`,
    [id],
  );
  // In an ordered key's chain: cancelled where they wait, so that what waits
  // behind them goes on in order once they end (failed, unsent).
  await client.query(`UPDATE deliveries SET cancelled = $2 WHERE sync_computation_id = $1 AND sync_key IS NULL AND status IN ('pending', 'transforming')`, [id, cancelledSyncReason(kind)]);
  return true;
}

async function identifiersOf(pool: Queryable, ids: readonly string[]): Promise<Map<string, string[]>> {
  const byProfile = new Map<string, string[]>();
  if (ids.length === 0) return byProfile;
  const { rows } = await pool.query<{ identifier: string; profile_id: string }>(
    `SELECT identifier, profile_id FROM profile_identifiers WHERE profile_id = ANY($1::text[])`,
    [ids],
  );
  // Appended in place: copying the list per row made a profile of n identifiers cost n² (issue 29).
  for (const row of rows) {
    const list = byProfile.get(row.profile_id);
    if (list === undefined) byProfile.set(row.profile_id, [row.identifier]);
    else list.push(row.identifier);
  }
  return byProfile;
}

/** In join order, on the index profile_outputs_by_join; `after` undefined: from the first (every since is ≥ 0). */
export async function listMembers(pool: Queryable, computationId: string, limit: number, after: Pick<ComputationMember, 'since' | 'profileId'> | undefined): Promise<ComputationMember[]> {
  const { rows } = await pool.query<OutputRow>(
    `SELECT * FROM profile_outputs WHERE computation_id = $1 AND (since, profile_id) > ($2, $3) ORDER BY since, profile_id LIMIT $4`,
    [computationId, after?.since ?? -1, after?.profileId ?? '', limit],
  );
  const identifiers = await identifiersOf(pool, rows.map((r) => r.profile_id));
  return rows.map((row) => ({
    profileId: row.profile_id,
    identifiers: [...(identifiers.get(row.profile_id) ?? [])].sort(),
    value: JSON.parse(row.value) as unknown,
    since: row.since,
  }));
}

export async function findProfileIds(pool: Queryable, identifiers: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (identifiers.length === 0) return found;
  const { rows } = await pool.query<{ identifier: string; profile_id: string }>(
    `SELECT identifier, profile_id FROM profile_identifiers WHERE identifier = ANY($1::text[])`,
    [identifiers],
  );
  for (const row of rows) found.set(row.identifier, row.profile_id);
  return found;
}

export async function getProfiles(pool: Queryable, ids: readonly string[]): Promise<ProfileRecord[]> {
  if (ids.length === 0) return [];
  const { rows } = await pool.query<ProfileRow>(`SELECT * FROM profiles WHERE id = ANY($1::text[])`, [ids]);
  const identifiers = await identifiersOf(pool, ids);
  const memberships = new Map<string, OutputRow[]>();
  const memberRows = await pool.query<OutputRow>(`SELECT * FROM profile_outputs WHERE profile_id = ANY($1::text[])`, [ids]);
  for (const row of memberRows.rows) {
    const held = memberships.get(row.profile_id);
    if (held === undefined) memberships.set(row.profile_id, [row]);
    else held.push(row);
  }
  return rows.map((row) => toProfileRecord(row, identifiers.get(row.id) ?? [], memberships.get(row.id) ?? []));
}

export async function listExpiredProfileIds(pool: Queryable, now: number, limit: number): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id FROM profiles WHERE next_expiry IS NOT NULL AND next_expiry <= $1 ORDER BY next_expiry LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => r.id);
}

export async function listProfileIds(pool: Queryable, afterId: string, limit: number): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(`SELECT id FROM profiles WHERE id > $1 ORDER BY id LIMIT $2`, [afterId, limit]);
  return rows.map((r) => r.id);
}

export async function listMessagesSince(pool: Queryable, afterSeq: number, limit: number, uptoSeq: number | undefined): Promise<StoredMessage[]> {
  const { rows } = await pool.query<MessageRow>(`SELECT * FROM messages WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`, [
    afterSeq,
    uptoSeq ?? Number.MAX_SAFE_INTEGER,
    limit,
  ]);
  return rows.map(toStoredMessage);
}

export async function getMessagesBySeq(pool: Queryable, seqs: readonly number[]): Promise<StoredMessage[]> {
  if (seqs.length === 0) return [];
  const { rows } = await pool.query<MessageRow>(`SELECT * FROM messages WHERE seq = ANY($1::bigint[]) ORDER BY seq DESC`, [seqs]);
  return rows.map(toStoredMessage);
}

export async function getCursor(pool: Queryable): Promise<number> {
  const { rows } = await pool.query<{ cursor_seq: number }>(`SELECT cursor_seq FROM engage_state WHERE id = 1`);
  return rows[0]!.cursor_seq;
}

export async function getStreamPosition(pool: Queryable): Promise<{ cursor: number; erasures: number }> {
  const { rows } = await pool.query<{ cursor_seq: number; erasures: number }>(`SELECT cursor_seq, erasures FROM engage_state WHERE id = 1`);
  return { cursor: rows[0]!.cursor_seq, erasures: Number(rows[0]!.erasures) };
}

/** See Store.oldestUnevaluatedMessage: one seek along the primary key, just past the cursor. */
export async function oldestUnevaluated(pool: Queryable): Promise<{ seq: number; receivedAt: number } | undefined> {
  const { rows } = await pool.query<{ seq: number; received_at: number }>(
    `SELECT seq, received_at FROM messages WHERE seq > (SELECT cursor_seq FROM engage_state WHERE id = 1) ORDER BY seq LIMIT 1`,
  );
  const row = rows[0];
  return row === undefined ? undefined : { seq: row.seq, receivedAt: row.received_at };
}

/**
 * One conditional UPDATE: of nodes asking at once, the row lock lets exactly
 * one through. The lease is free when nobody holds it, when it ran out, or
 * when the session its holder recorded (its LISTEN connection, `backend`) is
 * gone: a node killed with SIGKILL loses that session at once, so the node
 * restarted in its place (or another) resumes without waiting up to the
 * lease's length. A holder whose connection merely dropped and came back
 * loses the lease to whoever asks first; Engage's commits are conditional
 * on the cursor, so two evaluators for a moment still commit nothing twice.
 */
export async function claimLease(pool: Queryable, owner: string, now: number, ttlMs: number, backend: string | undefined): Promise<boolean> {
  const result = await pool.query(
    `UPDATE engage_state SET lease_owner = $1, lease_expires_at = $2, lease_backend = $4
     WHERE id = 1 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_at < $3
       OR (lease_backend IS NOT NULL AND NOT ${liveBackendSql('lease_backend')}))`,
    [owner, now + ttlMs, now, backend ?? null],
  );
  return (result.rowCount ?? 0) > 0;
}

export async function releaseLease(pool: Queryable, owner: string): Promise<void> {
  await pool.query(`UPDATE engage_state SET lease_owner = NULL, lease_expires_at = 0, lease_backend = NULL WHERE id = 1 AND lease_owner = $1`, [owner]);
}

/**
 * Writes a batch in the caller's transaction; throws EngageConflict (the
 * caller rolls back) when a condition no longer holds. Each conditional
 * UPDATE/DELETE takes the row locks first, so a concurrent writer of the same
 * profiles waits for this commit and then finds the versions changed (and
 * its statement touches fewer rows than it names). The writes of all the
 * batch's profiles go as a few statements over arrays (unnest), not a round
 * trip per row. Returns whether deliveries were queued.
 */
export async function commitEngage(client: pg.ClientBase, batch: EngageBatch): Promise<boolean> {
  // First, before any other lock: a delete of one of them waits for this commit, or this one for the delete.
  const computations = batch.computations ?? [];
  if (computations.length > 0) {
    const { rows } = await client.query<{ id: string; version: number }>(`SELECT id, version FROM computations WHERE id = ANY($1::text[]) FOR SHARE`, [
      computations.map((c) => c.id),
    ]);
    const versions = new Map(rows.map((r) => [r.id, Number(r.version)]));
    for (const computation of computations) {
      if (versions.get(computation.id) !== computation.version) throw new EngageConflict(`computation ${computation.id} deleted or changed`);
    }
  }
  if (batch.cursor !== undefined) {
    const moved = await client.query(`UPDATE engage_state SET cursor_seq = $1 WHERE id = 1 AND cursor_seq = $2 AND erasures = $3`, [
      batch.cursor.to,
      batch.cursor.from,
      batch.cursor.erasures,
    ]);
    if ((moved.rowCount ?? 0) === 0) throw new EngageConflict('cursor moved, or users were erased');
  }
  if (batch.deletedProfiles.length > 0) {
    const ids = batch.deletedProfiles.map((p) => p.id);
    const deleted = await client.query(
      `DELETE FROM profiles p USING unnest($1::text[], $2::bigint[]) AS d(id, version) WHERE p.id = d.id AND p.version = d.version`,
      [ids, batch.deletedProfiles.map((p) => p.expectedVersion)],
    );
    if ((deleted.rowCount ?? 0) !== ids.length) throw new EngageConflict('a deleted profile changed');
    await client.query(`DELETE FROM profile_identifiers WHERE profile_id = ANY($1::text[])`, [ids]);
    await client.query(`DELETE FROM profile_outputs WHERE profile_id = ANY($1::text[])`, [ids]);
  }
  const created = batch.profiles.filter((p) => p.expectedVersion === 0);
  const changed = batch.profiles.filter((p) => p.expectedVersion !== 0);
  const columns = (profiles: typeof batch.profiles): unknown[] => [
    profiles.map((p) => p.id),
    profiles.map((p) => p.state),
    profiles.map((p) => JSON.stringify(p.recentSeqs)),
    profiles.map((p) => p.nextExpiry ?? null),
    profiles.map((p) => JSON.stringify(p.computedTraits)),
  ];
  if (created.length > 0) {
    const inserted = await client.query(
      `INSERT INTO profiles (id, state, version, recent_seqs, next_expiry, updated_at, computed_traits)
       SELECT id, state, 1, recent_seqs, next_expiry, $6, computed_traits
       FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) AS n(id, state, recent_seqs, next_expiry, computed_traits)
       ON CONFLICT DO NOTHING`,
      [...columns(created), batch.at],
    );
    if ((inserted.rowCount ?? 0) !== created.length) throw new EngageConflict('a new profile exists');
  }
  if (changed.length > 0) {
    const updated = await client.query(
      `UPDATE profiles p SET state = u.state, version = p.version + 1, recent_seqs = u.recent_seqs, next_expiry = u.next_expiry,
         updated_at = $7, computed_traits = u.computed_traits
       FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[]) AS u(id, state, recent_seqs, next_expiry, computed_traits, expected)
       WHERE p.id = u.id AND p.version = u.expected`,
      [...columns(changed), changed.map((p) => p.expectedVersion), batch.at],
    );
    if ((updated.rowCount ?? 0) !== changed.length) throw new EngageConflict('a profile changed');
  }
  // identifier → profile: one statement may not upsert a row twice, and the last write would win anyway.
  const owners = new Map<string, string>();
  for (const profile of batch.profiles) for (const identifier of profile.identifiers) owners.set(identifier, profile.id);
  if (owners.size > 0) {
    await client.query(
      `INSERT INTO profile_identifiers (identifier, profile_id) SELECT * FROM unnest($1::text[], $2::text[])
       ON CONFLICT (identifier) DO UPDATE SET profile_id = excluded.profile_id`,
      [[...owners.keys()], [...owners.values()]],
    );
  }
  const left = batch.profiles.flatMap((p) => p.membershipChanges.filter((c) => !c.member).map((c) => [p.id, c.computationId] as const));
  const joined = batch.profiles.flatMap((p) => p.membershipChanges.filter((c) => c.member).map((c) => [p.id, c.computationId] as const));
  if (left.length > 0) {
    await client.query(
      `DELETE FROM profile_outputs o USING unnest($1::text[], $2::text[]) AS l(profile_id, computation_id)
       WHERE o.profile_id = l.profile_id AND o.computation_id = l.computation_id`,
      [left.map(([id]) => id), left.map(([, computation]) => computation)],
    );
  }
  if (joined.length > 0) {
    await client.query(
      `INSERT INTO profile_outputs (computation_id, profile_id, value, since)
       SELECT computation_id, profile_id, 'true', $3 FROM unnest($1::text[], $2::text[]) AS j(profile_id, computation_id)
       ON CONFLICT (computation_id, profile_id) DO NOTHING`,
      [joined.map(([id]) => id), joined.map(([, computation]) => computation), batch.at],
    );
  }
  const chains = syncChainsOf(batch.messages);
  const parked = await supersedeSyncs(client, chains, batch.at);
  const { seqs, deliveriesAdded } = await insertMessages(client, batch.messages, batch.messages.map(() => 'accepted'));
  if (chains.length > 0) {
    await client.query(
      `UPDATE deliveries d SET sync_computation_id = c.computation_id, sync_key = c.key,
         next_attempt_at = CASE WHEN c.parked THEN $5 ELSE d.next_attempt_at END
       FROM unnest($1::bigint[], $2::text[], $3::text[], $4::boolean[], $6::text[]) AS c(seq, computation_id, key, parked, destination)
       WHERE d.message_seq = c.seq AND d.destination = c.destination`,
      [
        chains.map((c) => seqs[c.index]),
        chains.map((c) => c.computationId),
        chains.map((c) => c.key),
        chains.map((c) => parked.has(`${c.computationId} ${c.key}`)),
        PARKED_AT,
        chains.map((c) => c.destination),
      ],
    );
  }
  const ordered = batch.messages.flatMap((entry, index) => {
    const computationId = orderedSyncOf(entry);
    return computationId === undefined ? [] : [{ seq: seqs[index]!, computationId }];
  });
  if (ordered.length > 0) {
    await client.query(
      `UPDATE deliveries d SET sync_computation_id = o.computation_id
       FROM unnest($1::bigint[], $2::text[]) AS o(seq, computation_id)
       WHERE d.message_seq = o.seq AND d.destination = 'webhooks'`,
      [ordered.map((o) => o.seq), ordered.map((o) => o.computationId)],
    );
  }
  for (const live of batch.computationsLive ?? []) {
    const marked = await client.query(`UPDATE computations SET status = 'live', updated_at = $1 WHERE id = $2 AND version = $3`, [batch.at, live.id, live.version]);
    if ((marked.rowCount ?? 0) === 0) throw new EngageConflict('computation changed');
  }
  return deliveriesAdded;
}

/**
 * Drops the chains' pending deliveries that are not in flight (see
 * engage-sync-chain.ts); resolves the chains ("computation key") that still
 * have one in flight. A claim that holds a row's lock makes the DELETE wait
 * and then skip the row it leased; a row the DELETE locked first, the claim
 * skips. `except`: a delivery that is neither dropped nor counted.
 */
async function supersedeSyncs(
  client: pg.ClientBase,
  chains: ReadonlyArray<{ readonly computationId: string; readonly key: string }>,
  now: number,
  except: readonly number[] = [],
): Promise<Set<string>> {
  if (chains.length === 0) return new Set();
  const values = [chains.map((c) => c.computationId), chains.map((c) => c.key), now, except];
  await client.query(
    `WITH gone AS (
       DELETE FROM deliveries d USING unnest($1::text[], $2::text[]) AS c(computation_id, key)
       WHERE d.sync_computation_id = c.computation_id AND d.sync_key = c.key AND d.status = 'pending'
         AND (d.lease_owner IS NULL OR d.next_attempt_at <= $3) AND d.id <> ALL($4::bigint[])
       RETURNING d.id)
     DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM gone)`,
    values,
  );
  const { rows } = await client.query<{ computation_id: string; key: string }>(
    `SELECT DISTINCT d.sync_computation_id AS computation_id, d.sync_key AS key
     FROM deliveries d JOIN unnest($1::text[], $2::text[]) AS c(computation_id, key)
       ON d.sync_computation_id = c.computation_id AND d.sync_key = c.key
     WHERE d.status = 'pending' AND d.id <> ALL($3::bigint[])`,
    [values[0], values[1], except],
  );
  return new Set(rows.map((r) => `${r.computation_id} ${r.key}`));
}

/** Whether any delivery is parked (a read: the release opens a transaction only then). */
export async function hasParkedSyncs(pool: Queryable): Promise<boolean> {
  const { rows } = await pool.query(`SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at >= $1 LIMIT 1`, [PARKED_AT]);
  return rows.length > 0;
}

/** See Store.releaseEngageSyncs: parked deliveries whose chain has nothing in flight any more become due now. */
export async function releaseSyncs(client: pg.ClientBase, now: number, limit: number): Promise<{ released: number; parked: number }> {
  const { rows } = await client.query<{ id: number; computation_id: string; key: string }>(
    `SELECT id, sync_computation_id AS computation_id, sync_key AS key FROM deliveries
     WHERE status = 'pending' AND next_attempt_at >= $1 AND sync_computation_id IS NOT NULL
     ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [PARKED_AT, limit],
  );
  if (rows.length === 0) return { released: 0, parked: 0 };
  const ids = rows.map((r) => Number(r.id));
  const busy = await supersedeSyncs(client, rows.map((r) => ({ computationId: r.computation_id, key: r.key })), now, ids);
  const ready = rows.filter((r) => !busy.has(`${r.computation_id} ${r.key}`)).map((r) => Number(r.id));
  if (ready.length > 0) {
    await client.query(`UPDATE deliveries SET next_attempt_at = $1, updated_at = $1 WHERE id = ANY($2::bigint[])`, [now, ready]);
  }
  return { released: ready.length, parked: rows.length - ready.length };
}
