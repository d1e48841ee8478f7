/** One stored version of a source's tracking plan. */
export interface TrackingPlanRecord {
  /** The plan's id: kept by every version until the plan is deleted (`context.trackingPlanId`). */
  readonly id: string;
  readonly sourceId: string;
  /** 1, 2, … per source, never reused, a deletion included (`context.trackingPlanVersion`). */
  readonly version: number;
  /** The plan as checked by `parseTrackingPlan`, as JSON text. */
  readonly plan: string;
  readonly createdAt: number;
}

/** Versions kept per source (the current one and the ones before it). */
export const PLAN_VERSIONS_KEPT = 20;

/**
 * Tracking plans, versioned per source. Writes are config changes: they bump
 * the config version and notify `config`, so every node's `SourceDirectory`
 * takes the new version within its poll interval (at once on this node).
 */
export interface TrackingPlanStore {
  /** Stores a new version of the source's plan (keeping its id, or `newId` when it has none); prunes versions past {@link PLAN_VERSIONS_KEPT}. */
  putTrackingPlan(sourceId: string, plan: string, now: number, newId: string): Promise<TrackingPlanRecord>;
  /** Removes the source's plan (a version without one); false when it had none. */
  deleteTrackingPlan(sourceId: string, now: number): Promise<boolean>;
  getTrackingPlan(sourceId: string): Promise<TrackingPlanRecord | undefined>;
  /** The current plan of every source that has one. */
  listTrackingPlans(): Promise<TrackingPlanRecord[]>;
}

export interface TrackingPlanRow {
  id: string;
  source_id: string;
  version: number | string;
  plan: string | null;
  created_at: number | string;
}

export function toTrackingPlan(row: TrackingPlanRow): TrackingPlanRecord {
  return { id: row.id, sourceId: row.source_id, version: Number(row.version), plan: row.plan ?? '', createdAt: Number(row.created_at) };
}
