import type { Database } from 'better-sqlite3';
import type { FunctionCodeRecord, FunctionDestinationPatch, FunctionDestinationRecord, FunctionWriteRefusal, NewFunctionDestination } from '../function-records.js';
import { type FunctionDestinationRow, toFunctionDestination } from '../function-rows.js';

/**
 * Function destinations and their versions of code. Writers run inside the
 * store's config transaction (it bumps the config version), which on SQLite
 * is the one writer: the count and name checks cannot race.
 */
export function insertFunctionDestination(db: Database, fn: NewFunctionDestination, maxPerSource: number): FunctionDestinationRecord | FunctionWriteRefusal {
  const rows = db.prepare('SELECT name FROM function_destinations WHERE source_id = ?').all(fn.sourceId) as Array<{ name: string }>;
  if (rows.some((r) => r.name === fn.name)) return 'name_taken';
  if (rows.length >= maxPerSource) return 'limit';
  db.prepare(`
    INSERT INTO function_destinations (id, source_id, name, enabled, settings, max_requests_per_second, latest_version, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)`).run(fn.id, fn.sourceId, fn.name, fn.enabled ? 1 : 0, JSON.stringify(fn.settings), fn.maxRequestsPerSecond ?? null, fn.at, fn.at);
  db.prepare('INSERT INTO function_versions (function_id, version, code, created_at) VALUES (?, 1, ?, ?)').run(fn.id, fn.code, fn.at);
  return getFunctionDestination(db, fn.id)!;
}

export function updateFunctionDestination(db: Database, id: string, patch: FunctionDestinationPatch, at: number): FunctionDestinationRecord | FunctionWriteRefusal | undefined {
  const current = getFunctionDestination(db, id);
  if (current === undefined) return undefined;
  if (patch.name !== undefined && patch.name !== current.name) {
    const taken = db.prepare('SELECT 1 FROM function_destinations WHERE source_id = ? AND name = ?').get(current.sourceId, patch.name);
    if (taken !== undefined) return 'name_taken';
  }
  const version = patch.code === undefined ? current.version : current.version + 1;
  if (patch.code !== undefined) db.prepare('INSERT INTO function_versions (function_id, version, code, created_at) VALUES (?, ?, ?, ?)').run(id, version, patch.code, at);
  const cap = patch.maxRequestsPerSecond === undefined ? (current.maxRequestsPerSecond ?? null) : patch.maxRequestsPerSecond;
  db.prepare(`
    UPDATE function_destinations SET name = ?, enabled = ?, settings = ?, max_requests_per_second = ?, latest_version = ?, updated_at = ?
    WHERE id = ?`).run(
    patch.name ?? current.name,
    (patch.enabled ?? current.enabled) ? 1 : 0,
    JSON.stringify(patch.settings ?? current.settings),
    cap,
    version,
    at,
    id,
  );
  return getFunctionDestination(db, id);
}

export function listFunctionDestinations(db: Database, sourceId?: string): FunctionDestinationRecord[] {
  const rows = (
    sourceId === undefined
      ? db.prepare('SELECT * FROM function_destinations ORDER BY created_at, id').all()
      : db.prepare('SELECT * FROM function_destinations WHERE source_id = ? ORDER BY created_at, id').all(sourceId)
  ) as FunctionDestinationRow[];
  return rows.map(toFunctionDestination);
}

export function getFunctionDestination(db: Database, id: string): FunctionDestinationRecord | undefined {
  const row = db.prepare('SELECT * FROM function_destinations WHERE id = ?').get(id) as FunctionDestinationRow | undefined;
  return row === undefined ? undefined : toFunctionDestination(row);
}

export function getFunctionCode(db: Database, id: string, version?: number): FunctionCodeRecord | undefined {
  const row = db
    .prepare(`
      SELECT v.version, v.code, v.created_at FROM function_destinations f
      JOIN function_versions v ON v.function_id = f.id AND v.version = coalesce(?, f.latest_version)
      WHERE f.id = ?`)
    .get(version ?? null, id) as { version: number; code: string; created_at: number } | undefined;
  return row === undefined ? undefined : { functionId: id, version: row.version, code: row.code, createdAt: row.created_at };
}

export function deleteFunctionDestination(db: Database, id: string): boolean {
  db.prepare('DELETE FROM function_versions WHERE function_id = ?').run(id);
  return db.prepare('DELETE FROM function_destinations WHERE id = ?').run(id).changes > 0;
}

/** With a source: its function destinations go too. */
export function deleteSourceFunctions(db: Database, sourceId: string): void {
  db.prepare('DELETE FROM function_versions WHERE function_id IN (SELECT id FROM function_destinations WHERE source_id = ?)').run(sourceId);
  db.prepare('DELETE FROM function_destinations WHERE source_id = ?').run(sourceId);
}
