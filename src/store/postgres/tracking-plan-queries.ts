// Tracking plans: rows (source_id, version), the newest the current one; a
// row without a plan records a deletion (so versions are never reused).
// Writers run in the caller's transaction, which bumps the config version
// first (so writers of one source never race for a version).
import type pg from 'pg';
import { PLAN_VERSIONS_KEPT, type TrackingPlanRecord, type TrackingPlanRow, toTrackingPlan } from '../tracking-plan-records.js';

const CURRENT = `SELECT * FROM tracking_plans t WHERE t.version = (SELECT max(version) FROM tracking_plans WHERE source_id = t.source_id) AND t.plan IS NOT NULL`;

export async function getTrackingPlan(db: pg.ClientBase | pg.Pool, sourceId: string): Promise<TrackingPlanRecord | undefined> {
  const { rows } = await db.query<TrackingPlanRow>(`${CURRENT} AND t.source_id = $1`, [sourceId]);
  return rows[0] === undefined ? undefined : toTrackingPlan(rows[0]);
}

export async function listTrackingPlans(pool: pg.Pool): Promise<TrackingPlanRecord[]> {
  const { rows } = await pool.query<TrackingPlanRow>(CURRENT);
  return rows.map(toTrackingPlan);
}

async function nextVersion(client: pg.ClientBase, sourceId: string): Promise<number> {
  const { rows } = await client.query<{ v: string }>('SELECT coalesce(max(version), 0) AS v FROM tracking_plans WHERE source_id = $1', [sourceId]);
  return Number(rows[0]!.v) + 1;
}

export async function putTrackingPlan(client: pg.ClientBase, sourceId: string, plan: string, now: number, newId: string): Promise<TrackingPlanRecord> {
  const id = (await getTrackingPlan(client, sourceId))?.id ?? newId;
  const version = await nextVersion(client, sourceId);
  await client.query('INSERT INTO tracking_plans (source_id, version, id, plan, created_at) VALUES ($1, $2, $3, $4, $5)', [sourceId, version, id, plan, now]);
  await client.query('DELETE FROM tracking_plans WHERE source_id = $1 AND version <= $2', [sourceId, version - PLAN_VERSIONS_KEPT]);
  return { id, sourceId, version, plan, createdAt: now };
}

export async function deleteTrackingPlan(client: pg.ClientBase, sourceId: string, now: number): Promise<boolean> {
  const current = await getTrackingPlan(client, sourceId);
  if (current === undefined) return false;
  await client.query('INSERT INTO tracking_plans (source_id, version, id, plan, created_at) VALUES ($1, $2, $3, NULL, $4)', [sourceId, await nextVersion(client, sourceId), current.id, now]);
  return true;
}
