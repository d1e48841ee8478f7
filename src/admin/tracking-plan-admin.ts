import { randomToken } from '../util/crypto.js';
import { parseTrackingPlan, type TrackingPlanDefinition, TrackingPlanError } from '../domain/tracking-plan.js';
import { ApiError } from '../errors.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { Store, TrackingPlanRecord } from '../store/store.js';

/** A source's tracking plan as the admin API shows it: the definition, with its id and version. */
export type TrackingPlanView = TrackingPlanDefinition & { readonly id: string; readonly sourceId: string; readonly version: number; readonly createdAt: string };

function viewPlan(record: TrackingPlanRecord): TrackingPlanView {
  return { ...(JSON.parse(record.plan) as TrackingPlanDefinition), id: record.id, sourceId: record.sourceId, version: record.version, createdAt: new Date(record.createdAt).toISOString() };
}

/**
 * Tracking plans of sources, for the admin routes. A change is a config
 * change: it is answered once this node's directory has it, so a message
 * sent after the answer is checked against the new version (processing
 * waits for the config version its raw request was taken with), and other
 * nodes take it within their config poll.
 */
export class TrackingPlanAdmin {
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    private readonly directory?: SourceDirectory,
  ) {}

  async put(sourceId: string, input: unknown): Promise<TrackingPlanView> {
    await this.requireSource(sourceId);
    let plan: TrackingPlanDefinition;
    try {
      plan = parseTrackingPlan(input);
    } catch (error) {
      if (error instanceof TrackingPlanError) throw new ApiError('invalid_tracking_plan', error.message, { cause: error });
      throw error;
    }
    const record = await this.store.putTrackingPlan(sourceId, JSON.stringify(plan), this.now(), `tp_${randomToken(20)}`);
    await this.directory?.reload();
    return viewPlan(record);
  }

  async get(sourceId: string): Promise<TrackingPlanView> {
    await this.requireSource(sourceId);
    const record = await this.store.getTrackingPlan(sourceId);
    if (record === undefined) throw new ApiError('not_found', `source ${sourceId} has no tracking plan`);
    return viewPlan(record);
  }

  async delete(sourceId: string): Promise<void> {
    await this.requireSource(sourceId);
    if (!(await this.store.deleteTrackingPlan(sourceId, this.now()))) throw new ApiError('not_found', `source ${sourceId} has no tracking plan`);
    await this.directory?.reload();
  }

  private async requireSource(sourceId: string): Promise<void> {
    if ((await this.store.getSource(sourceId)) === undefined) throw new ApiError('not_found', `no source ${sourceId}`);
  }
}
