// Sources and destinations: the configuration every node caches. Writers run
// in the caller's transaction, which bumps the config version.
import type pg from 'pg';
import type { DestinationKind } from '../../domain/routing.js';
import { sha256Hex } from '../../util/crypto.js';
import { type DestinationRow, type SourceRow, toDestination, toSource } from '../rows.js';
import type { DestinationRecord, SourcePatch, SourceRecord } from '../store.js';

export async function insertSource(client: pg.ClientBase, source: SourceRecord): Promise<void> {
  await client.query(
    `INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [source.id, source.name, source.writeKey, sha256Hex(source.writeKey), source.enabled, source.createdAt, source.updatedAt],
  );
}

export async function listSources(pool: pg.Pool): Promise<SourceRecord[]> {
  const { rows } = await pool.query<SourceRow>('SELECT * FROM sources ORDER BY created_at, id');
  return rows.map(toSource);
}

export async function getSource(pool: pg.Pool, id: string): Promise<SourceRecord | undefined> {
  const { rows } = await pool.query<SourceRow>('SELECT * FROM sources WHERE id = $1', [id]);
  return rows[0] === undefined ? undefined : toSource(rows[0]);
}

export async function updateSource(client: pg.ClientBase, id: string, patch: SourcePatch, now: number): Promise<SourceRecord | undefined> {
  const { rows } = await client.query<SourceRow>(
    `UPDATE sources SET name = COALESCE($1, name), enabled = COALESCE($2, enabled), updated_at = $3
     WHERE id = $4 RETURNING *`,
    [patch.name ?? null, patch.enabled ?? null, now, id],
  );
  return rows[0] === undefined ? undefined : toSource(rows[0]);
}

/** Deletes the source with everything stored for it; false when there is no such source. */
export async function deleteSource(client: pg.ClientBase, id: string): Promise<boolean> {
  const deleted = await client.query('DELETE FROM sources WHERE id = $1', [id]);
  if (deleted.rowCount === 0) return false;
  await client.query('DELETE FROM destinations WHERE source_id = $1', [id]);
  await client.query('DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE source_id = $1)', [id]);
  await client.query('DELETE FROM deliveries WHERE source_id = $1', [id]);
  await client.query('DELETE FROM messages WHERE source_id = $1', [id]);
  await client.query('DELETE FROM raw_requests WHERE source_id = $1', [id]);
  await client.query('DELETE FROM dedupe_keys WHERE source_id = $1', [id]);
  await client.query('DELETE FROM replays WHERE source_id = $1', [id]);
  await client.query('DELETE FROM tracking_plans WHERE source_id = $1', [id]);
  for (const table of ['observed_paths', 'observed_events', 'plan_violations']) await client.query(`DELETE FROM ${table} WHERE source_id = $1`, [id]);
  await client.query('DELETE FROM function_versions WHERE function_id IN (SELECT id FROM function_destinations WHERE source_id = $1)', [id]);
  await client.query('DELETE FROM function_destinations WHERE source_id = $1', [id]);
  return true;
}

export async function putDestination(client: pg.ClientBase, destination: DestinationRecord): Promise<void> {
  await client.query(
    `INSERT INTO destinations (source_id, kind, enabled, settings, updated_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (source_id, kind) DO UPDATE SET
       enabled = excluded.enabled, settings = excluded.settings, updated_at = excluded.updated_at`,
    [destination.sourceId, destination.kind, destination.enabled, JSON.stringify(destination.settings), destination.updatedAt],
  );
}

export async function deleteDestination(client: pg.ClientBase, sourceId: string, kind: DestinationKind): Promise<boolean> {
  const { rowCount } = await client.query('DELETE FROM destinations WHERE source_id = $1 AND kind = $2', [sourceId, kind]);
  return (rowCount ?? 0) > 0;
}

export async function getDestination(pool: pg.Pool, sourceId: string, kind: DestinationKind): Promise<DestinationRecord | undefined> {
  const { rows } = await pool.query<DestinationRow>('SELECT * FROM destinations WHERE source_id = $1 AND kind = $2', [sourceId, kind]);
  return rows[0] === undefined ? undefined : toDestination(rows[0]);
}

export async function listDestinations(pool: pg.Pool): Promise<DestinationRecord[]> {
  const { rows } = await pool.query<DestinationRow>('SELECT * FROM destinations');
  return rows.map(toDestination);
}
