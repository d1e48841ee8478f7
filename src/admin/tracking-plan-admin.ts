import { randomToken } from '../util/crypto.js';
import { parseTrackingPlan, PLAN_BOUNDS, type TrackingPlanDefinition, TrackingPlanError } from '../domain/tracking-plan.js';
import {
  DAY_MS,
  dayOf,
  decodeSchemaCursor,
  DRAFT_PAGE,
  OBSERVED_BOUNDS,
  observedDays,
  ObservedSchemaPage,
  type ObservedSchemaView,
  SCHEMA_PAGE,
} from '../domain/observed-schema.js';
import { hourOf, VIOLATION_BOUNDS, type ViolationsView, violationsView } from '../domain/plan-violation-counts.js';
import { draftPlan } from '../domain/plan-draft.js';
import { isJsonObject, type JsonObject } from '../domain/message.js';
import { commonDepth, messagePaths, type ObservedFields, type PlanWarning, planWarnings, type RecentTraffic, requiredPaths } from '../domain/plan-warnings.js';
import { limitParam, MAX_TIME_MS, MIN_TIME_MS, timeParam } from './validate.js';
import { ApiError } from '../errors.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { Store, TrackingPlanRecord } from '../store/store.js';

/** A source's tracking plan as the admin API shows it: the definition, with its id and version. */
export type TrackingPlanView = TrackingPlanDefinition & { readonly id: string; readonly sourceId: string; readonly version: number; readonly createdAt: string };

/** What a save answers: the plan, and its warnings (see domain/plan-warnings.ts). */
export type SavedTrackingPlan = TrackingPlanView & { readonly warnings: PlanWarning[] };

/** How much of the recent traffic a save's warnings read (see `TrackingPlanAdmin.recentTraffic`). */
export const SAVE_WARNING_BOUNDS = Object.freeze({ messages: 100, events: 100 });

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

  async put(sourceId: string, input: unknown): Promise<SavedTrackingPlan> {
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
    // After the save, which they never refuse: the traffic may be about to change.
    return { ...viewPlan(record), warnings: planWarnings(plan, await this.recentTraffic(sourceId, plan)) };
  }

  /**
   * What a save's warnings compare the plan with, over the recent traffic
   * (yesterday and today, UTC, as the observed schema counts days), at a
   * bounded cost whatever the source was sent: `common` against the
   * latest {@link SAVE_WARNING_BOUNDS.messages} stored messages (the
   * observed schema records `properties` and `traits` only, not the whole
   * message); events, identify and group traits against the observed
   * schema's {@link SAVE_WARNING_BOUNDS.events} most frequent events,
   * paths read only for those the plan requires something of.
   */
  private async recentTraffic(sourceId: string, plan: TrackingPlanDefinition): Promise<RecentTraffic> {
    const now = this.now();
    const from = dayOf(now) - DAY_MS;
    let common: ObservedFields | undefined;
    const depth = commonDepth(plan);
    if (depth > 0) {
      const paths = new Set<string>();
      let messages = 0;
      for (const stored of await this.store.listRecentMessages(sourceId, SAVE_WARNING_BOUNDS.messages)) {
        // What a plan checks: processed calls, not rejected bodies nor deletion requests.
        if (stored.receivedAt < from || stored.status === 'rejected' || stored.type === undefined || stored.type === 'delete') continue;
        let body: unknown;
        try {
          body = JSON.parse(stored.body);
        } catch {
          continue;
        }
        if (!isJsonObject(body)) continue;
        messages++;
        messagePaths(body, depth, paths);
      }
      common = { messages, paths };
    }
    const wanted = new Set<string>();
    for (const [event, entry] of Object.entries(plan.events)) if (requiredPaths(entry.properties).length > 0) wanted.add(`track\u0000${event}`);
    if (requiredPaths(plan.identify?.traits).length > 0) wanted.add('identify\u0000');
    if (requiredPaths(plan.group?.traits).length > 0) wanted.add('group\u0000');
    const events = new Map<string, ObservedFields>();
    if (wanted.size > 0) {
      const days = observedDays(from, dayOf(now), now);
      const { events: top } = await this.store.observedEvents(sourceId, days, undefined, SAVE_WARNING_BOUNDS.events);
      // An event whose paths were not all recorded cannot be said to lack one.
      const relevant = top.filter((e) => wanted.has(`${e.type}\u0000${e.event}`) && !e.pathsTruncated);
      for (let i = 0; i < relevant.length; i += SCHEMA_PAGE.eventsPerRead) {
        const chunk = relevant.slice(i, i + SCHEMA_PAGE.eventsPerRead);
        const rows = await this.store.observedPaths(sourceId, days, chunk, OBSERVED_BOUNDS.pathsPerEvent + 1);
        for (const e of chunk) {
          const paths = rows.filter((p) => p.type === e.type && p.event === e.event).map((p) => p.path);
          if (paths.length <= OBSERVED_BOUNDS.pathsPerEvent) events.set(`${e.type}\u0000${e.event}`, { messages: e.count, paths: new Set(paths) });
        }
      }
    }
    return { since: new Date(from).toISOString(), common, events };
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

  /**
   * What the source has received over a period (`since`, `until`: ISO
   * times or epoch ms; by default the last 7 days), by UTC day: the days
   * holding `since` and `until` are counted whole, and `from` / `to` say so.
   * One page: at most `limit` events (biggest count first) and
   * {@link SCHEMA_PAGE.paths} paths across them; `cursor` names the next.
   */
  async observedSchema(sourceId: string, query: { since?: unknown; until?: unknown; limit?: unknown; cursor?: unknown }): Promise<ObservedSchemaAnswer> {
    const limit = limitParam(query.limit, SCHEMA_PAGE.defaultEvents, SCHEMA_PAGE.maxEvents);
    const cursor = query.cursor;
    const after = typeof cursor === 'string' && cursor !== '' ? decodeSchemaCursor(cursor) : undefined;
    if (typeof cursor === 'string' && cursor !== '' && after === undefined) throw new ApiError('invalid_request', 'cursor is not one this API gave');
    return this.readSchema(sourceId, query, { after, limit, paths: SCHEMA_PAGE.paths });
  }

  private async readSchema(
    sourceId: string,
    query: { since?: unknown; until?: unknown },
    page: { after: ReturnType<typeof decodeSchemaCursor>; limit: number; paths: number },
  ): Promise<ObservedSchemaAnswer> {
    await this.requireSource(sourceId);
    const now = this.now();
    const until = timeParam(query.until, 'until') ?? now;
    const since = timeParam(query.since, 'since') ?? Math.max(MIN_TIME_MS, until - DEFAULT_SCHEMA_PERIOD_MS);
    if (since > until) throw new ApiError('invalid_request', 'since must not be after until');
    const fromDay = dayOf(since);
    const toDay = dayOf(until);
    const days = observedDays(fromDay, toDay, now);
    const { events, unrecordedMessages } = await this.store.observedEvents(sourceId, days, page.after, page.limit + 1);
    const builder = new ObservedSchemaPage(events, page.limit, page.paths, unrecordedMessages);
    for (let next = builder.next(); next.length > 0; next = builder.next()) {
      builder.add(await this.store.observedPaths(sourceId, days, next, OBSERVED_BOUNDS.pathsPerEvent + 1));
    }
    // `to` is the end of until's day; that of 9999-12-31 would be in year 10000: the last time the API takes instead.
    const to = Math.min(toDay + DAY_MS, MAX_TIME_MS);
    return { sourceId, from: new Date(fromDay).toISOString(), to: new Date(to).toISOString(), limits: SCHEMA_LIMITS, ...builder.view() };
  }

  /** Violation counts since `since` (by default the last 24 hours), by hour: the hour holding `since` counts whole. */
  async violations(sourceId: string, query: { since?: unknown }): Promise<ViolationsAnswer> {
    await this.requireSource(sourceId);
    const since = hourOf(timeParam(query.since, 'since') ?? this.now() - 24 * 3_600_000);
    const plan = await this.store.getTrackingPlan(sourceId);
    const view = violationsView(await this.store.violationCounts(sourceId, since));
    return { sourceId, since: new Date(since).toISOString(), plan: plan === undefined ? null : { id: plan.id, version: plan.version }, limits: VIOLATION_LIMITS, ...view };
  }

  /**
   * A plan drafted from the observed schema of the period (as {@link observedSchema});
   * not stored: edit it, then PUT it. Made from the most frequent events
   * while their paths fit in {@link DRAFT_PAGE}; the name says when events
   * were left out.
   */
  async draftFromSchema(sourceId: string, query: { since?: unknown; until?: unknown }): Promise<JsonObject> {
    const observed = await this.readSchema(sourceId, query, { after: undefined, limit: DRAFT_PAGE.events, paths: DRAFT_PAGE.paths });
    const period = `${observed.from.slice(0, 10)} to ${observed.to.slice(0, 10)}`;
    const name = observed.cursor === undefined ? `Drafted from ${period}` : `Drafted from ${period}: the ${observed.events.length} most frequent events only (more were received)`;
    const draft = draftPlan(observed, name);
    try {
      parseTrackingPlan(draft);
    } catch (error) {
      if (error instanceof TrackingPlanError) {
        throw new ApiError('invalid_request', `the drafted plan could not be used (${error.message}); choose a shorter period with since / until`, { cause: error });
      }
      throw error;
    }
    return draft;
  }

  private async requireSource(sourceId: string): Promise<void> {
    if ((await this.store.getSource(sourceId)) === undefined) throw new ApiError('not_found', `no source ${sourceId}`);
  }
}

const DEFAULT_SCHEMA_PERIOD_MS = 7 * DAY_MS;

/** The bounds the answers are kept within, so a client can tell a cap from the traffic. */
const SCHEMA_LIMITS = {
  eventsPerSourceAndDay: OBSERVED_BOUNDS.eventsPerSource,
  pathsPerEvent: OBSERVED_BOUNDS.pathsPerEvent,
  depth: OBSERVED_BOUNDS.depth,
  retentionDays: OBSERVED_BOUNDS.retentionDays,
  eventsPerPage: SCHEMA_PAGE.maxEvents,
  pathsPerPage: SCHEMA_PAGE.paths,
};
const VIOLATION_LIMITS = { rowsPerSourceAndHour: VIOLATION_BOUNDS.rowsPerSource, violationsPerMessage: PLAN_BOUNDS.violationsPerMessage };

export type ObservedSchemaAnswer = ObservedSchemaView & { readonly sourceId: string; readonly from: string; readonly to: string; readonly limits: typeof SCHEMA_LIMITS };
export type ViolationsAnswer = ViolationsView & { readonly sourceId: string; readonly since: string; readonly plan: { id: string; version: number } | null; readonly limits: typeof VIOLATION_LIMITS };
