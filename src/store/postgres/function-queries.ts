import type pg from 'pg';
import type { FunctionCodeRecord, FunctionDestinationPatch, FunctionDestinationRecord, FunctionWriteRefusal, NewFunctionDestination } from '../function-records.js';
import { type FunctionDestinationRow, toFunctionDestination } from '../function-rows.js';

/**
 * Function destinations and their versions of code. Writers run inside the
 * store's config transaction; they lock the source's row first, so two
 * nodes adding a sixth function (or the same name) at once queue, and the
 * second finds the first's row.
 */
export async function insertFunctionDestination(client: pg.ClientBase, fn: NewFunctionDestination, maxPerSource: number): Promise<FunctionDestinationRecord | FunctionWriteRefusal> {
  await client.query('SELECT 1 FROM sources WHERE id = $1 FOR UPDATE', [fn.sourceId]);
  const { rows } = await client.query<{ name: string }>('SELECT name FROM function_destinations WHERE source_id = $1', [fn.sourceId]);
  if (rows.some((r) => r.name === fn.name)) return 'name_taken';
  if (rows.length >= maxPerSource) return 'limit';
  await client.query(
    `INSERT INTO function_destinations (id, source_id, name, enabled, settings, max_requests_per_second, latest_version, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7)`,
    [fn.id, fn.sourceId, fn.name, fn.enabled, JSON.stringify(fn.settings), fn.maxRequestsPerSecond ?? null, fn.at],
  );
  await client.query('INSERT INTO function_versions (function_id, version, code, created_at) VALUES ($1, 1, $2, $3)', [fn.id, fn.code, fn.at]);
  return (await getFunctionDestination(client, fn.id))!;
}

export async function updateFunctionDestination(
  client: pg.ClientBase,
  id: string,
  patch: FunctionDestinationPatch,
  at: number,
): Promise<FunctionDestinationRecord | FunctionWriteRefusal | undefined> {
  const found = await client.query<{ source_id: string }>('SELECT source_id FROM function_destinations WHERE id = $1', [id]);
  if (found.rows[0] === undefined) return undefined;
  await client.query('SELECT 1 FROM sources WHERE id = $1 FOR UPDATE', [found.rows[0].source_id]);
  const current = await getFunctionDestination(client, id, true);
  if (current === undefined) return undefined;
  if (patch.name !== undefined && patch.name !== current.name) {
    const taken = await client.query('SELECT 1 FROM function_destinations WHERE source_id = $1 AND name = $2', [current.sourceId, patch.name]);
    if (taken.rows.length > 0) return 'name_taken';
  }
  const version = patch.code === undefined ? current.version : current.version + 1;
  if (patch.code !== undefined) {
    await client.query('INSERT INTO function_versions (function_id, version, code, created_at) VALUES ($1, $2, $3, $4)', [id, version, patch.code, at]);
  }
  const cap = patch.maxRequestsPerSecond === undefined ? (current.maxRequestsPerSecond ?? null) : patch.maxRequestsPerSecond;
  await client.query(
    `UPDATE function_destinations SET name = $1, enabled = $2, settings = $3, max_requests_per_second = $4, latest_version = $5, updated_at = $6 WHERE id = $7`,
    [patch.name ?? current.name, patch.enabled ?? current.enabled, JSON.stringify(patch.settings ?? current.settings), cap, version, at, id],
  );
  return getFunctionDestination(client, id);
}

export async function listFunctionDestinations(pool: pg.Pool | pg.ClientBase, sourceId?: string): Promise<FunctionDestinationRecord[]> {
  const { rows } =
    sourceId === undefined
      ? await pool.query<FunctionDestinationRow>('SELECT * FROM function_destinations ORDER BY created_at, id')
      : await pool.query<FunctionDestinationRow>('SELECT * FROM function_destinations WHERE source_id = $1 ORDER BY created_at, id', [sourceId]);
  return rows.map(toFunctionDestination);
}

export async function getFunctionDestination(pool: pg.Pool | pg.ClientBase, id: string, forUpdate = false): Promise<FunctionDestinationRecord | undefined> {
  const { rows } = await pool.query<FunctionDestinationRow>(`SELECT * FROM function_destinations WHERE id = $1${forUpdate ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0] === undefined ? undefined : toFunctionDestination(rows[0]);
}

export async function getFunctionCode(pool: pg.Pool, id: string, version?: number): Promise<FunctionCodeRecord | undefined> {
  const { rows } = await pool.query<{ version: number; code: string; created_at: number | string }>(
    `SELECT v.version, v.code, v.created_at FROM function_destinations f
     JOIN function_versions v ON v.function_id = f.id AND v.version = coalesce($1::int, f.latest_version)
     WHERE f.id = $2`,
    [version ?? null, id],
  );
  const row = rows[0];
  return row === undefined ? undefined : { functionId: id, version: row.version, code: row.code, createdAt: Number(row.created_at) };
}

export async function deleteFunctionDestination(client: pg.ClientBase, id: string): Promise<boolean> {
  await client.query('DELETE FROM function_versions WHERE function_id = $1', [id]);
  const { rowCount } = await client.query('DELETE FROM function_destinations WHERE id = $1', [id]);
  return (rowCount ?? 0) > 0;
}
