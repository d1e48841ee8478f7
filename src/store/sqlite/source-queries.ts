// Sources and destinations: the configuration the directory caches. Writers
// run in the caller's transaction, which bumps the config version (the
// store's configChange).
import type { Database } from 'better-sqlite3';
import type { DestinationKind } from '../../domain/routing.js';
import { sha256Hex } from '../../util/crypto.js';
import { deleteSourceFunctions } from './function-queries.js';
import { type DestinationRow, type SourceRow, toDestination, toSource } from '../rows.js';
import type { DestinationRecord, SourcePatch, SourceRecord } from '../store.js';

export function insertSource(db: Database, source: SourceRecord): void {
  db.prepare(`INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`).run(
    source.id,
    source.name,
    source.writeKey,
    sha256Hex(source.writeKey),
    source.enabled ? 1 : 0,
    source.createdAt,
    source.updatedAt,
  );
}

export function listSources(db: Database): SourceRecord[] {
  return (db.prepare('SELECT * FROM sources ORDER BY created_at, id').all() as SourceRow[]).map(toSource);
}

export function getSource(db: Database, id: string): SourceRecord | undefined {
  const row = db.prepare('SELECT * FROM sources WHERE id = ?').get(id) as SourceRow | undefined;
  return row === undefined ? undefined : toSource(row);
}

export function updateSource(db: Database, id: string, patch: SourcePatch, now: number): SourceRecord | undefined {
  const row = db
    .prepare(`
      UPDATE sources SET name = COALESCE(?, name), enabled = COALESCE(?, enabled), updated_at = ?
      WHERE id = ? RETURNING *`)
    .get(patch.name ?? null, patch.enabled === undefined ? null : patch.enabled ? 1 : 0, now, id) as SourceRow | undefined;
  return row === undefined ? undefined : toSource(row);
}

/** Deletes the source with everything stored for it; false when there is no such source. */
export function deleteSource(db: Database, id: string): boolean {
  const deleted = db.prepare('DELETE FROM sources WHERE id = ?').run(id).changes > 0;
  if (!deleted) return false;
  db.prepare('DELETE FROM destinations WHERE source_id = ?').run(id);
  db.prepare('DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE source_id = ?)').run(id);
  db.prepare('DELETE FROM deliveries WHERE source_id = ?').run(id);
  db.prepare('DELETE FROM messages WHERE source_id = ?').run(id);
  db.prepare('DELETE FROM raw_requests WHERE source_id = ?').run(id);
  db.prepare('DELETE FROM replays WHERE source_id = ?').run(id);
  db.prepare('DELETE FROM tracking_plans WHERE source_id = ?').run(id);
  for (const table of ['observed_paths', 'observed_events', 'plan_violations']) db.prepare(`DELETE FROM ${table} WHERE source_id = ?`).run(id);
  deleteSourceFunctions(db, id);
  return true;
}

export function putDestination(db: Database, destination: DestinationRecord): void {
  db.prepare(`
    INSERT INTO destinations (source_id, kind, enabled, settings, updated_at) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (source_id, kind) DO UPDATE SET
      enabled = excluded.enabled, settings = excluded.settings, updated_at = excluded.updated_at`).run(
    destination.sourceId,
    destination.kind,
    destination.enabled ? 1 : 0,
    JSON.stringify(destination.settings),
    destination.updatedAt,
  );
}

export function deleteDestination(db: Database, sourceId: string, kind: DestinationKind): boolean {
  return db.prepare('DELETE FROM destinations WHERE source_id = ? AND kind = ?').run(sourceId, kind).changes > 0;
}

export function getDestination(db: Database, sourceId: string, kind: DestinationKind): DestinationRecord | undefined {
  const row = db.prepare('SELECT * FROM destinations WHERE source_id = ? AND kind = ?').get(sourceId, kind) as DestinationRow | undefined;
  return row === undefined ? undefined : toDestination(row);
}

export function listDestinations(db: Database): DestinationRecord[] {
  return (db.prepare('SELECT * FROM destinations').all() as DestinationRow[]).map(toDestination);
}
