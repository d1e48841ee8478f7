// Tracking plans: rows (source_id, version), the newest the current one; a
// row without a plan records a deletion (so versions are never reused).
// Writers run in the caller's transaction, which bumps the config version.
import type { Database } from 'better-sqlite3';
import { PLAN_VERSIONS_KEPT, type TrackingPlanRecord, type TrackingPlanRow, toTrackingPlan } from '../tracking-plan-records.js';

const CURRENT = `SELECT * FROM tracking_plans t WHERE t.version = (SELECT max(version) FROM tracking_plans WHERE source_id = t.source_id) AND t.plan IS NOT NULL`;

export function getTrackingPlan(db: Database, sourceId: string): TrackingPlanRecord | undefined {
  const row = db.prepare(`${CURRENT} AND t.source_id = ?`).get(sourceId) as TrackingPlanRow | undefined;
  return row === undefined ? undefined : toTrackingPlan(row);
}

export function listTrackingPlans(db: Database): TrackingPlanRecord[] {
  return (db.prepare(CURRENT).all() as TrackingPlanRow[]).map(toTrackingPlan);
}

function nextVersion(db: Database, sourceId: string): number {
  const row = db.prepare('SELECT coalesce(max(version), 0) AS v FROM tracking_plans WHERE source_id = ?').get(sourceId) as { v: number };
  return row.v + 1;
}

export function putTrackingPlan(db: Database, sourceId: string, plan: string, now: number, newId: string): TrackingPlanRecord {
  const id = getTrackingPlan(db, sourceId)?.id ?? newId;
  const version = nextVersion(db, sourceId);
  db.prepare('INSERT INTO tracking_plans (source_id, version, id, plan, created_at) VALUES (?, ?, ?, ?, ?)').run(sourceId, version, id, plan, now);
  db.prepare('DELETE FROM tracking_plans WHERE source_id = ? AND version <= ?').run(sourceId, version - PLAN_VERSIONS_KEPT);
  return { id, sourceId, version, plan, createdAt: now };
}

export function deleteTrackingPlan(db: Database, sourceId: string, now: number): boolean {
  const current = getTrackingPlan(db, sourceId);
  if (current === undefined) return false;
  db.prepare('INSERT INTO tracking_plans (source_id, version, id, plan, created_at) VALUES (?, ?, ?, NULL, ?)').run(sourceId, nextVersion(db, sourceId), current.id, now);
  return true;
}
