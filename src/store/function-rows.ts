import type { FunctionDestinationRecord } from './function-records.js';

/** A `function_destinations` row as both adapters read it (`enabled`: 0/1 on SQLite, boolean on PostgreSQL). */
export interface FunctionDestinationRow {
  id: string;
  source_id: string;
  name: string;
  enabled: boolean | number;
  settings: string;
  max_requests_per_second: number | null;
  latest_version: number;
  created_at: number | string;
  updated_at: number | string;
}

export function toFunctionDestination(row: FunctionDestinationRow): FunctionDestinationRecord {
  return {
    id: row.id,
    sourceId: row.source_id,
    name: row.name,
    enabled: Boolean(row.enabled),
    settings: JSON.parse(row.settings) as Record<string, unknown>,
    maxRequestsPerSecond: row.max_requests_per_second ?? undefined,
    version: row.latest_version,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}
