import { isCallType, isJsonObject, type JsonObject } from './message.js';
import type { CompiledPlan } from './tracking-plan.js';
import { checkAgainstPlan, type Violation } from './tracking-plan-check.js';

/** A stored message, as the preview reads it. */
export interface PreviewInput {
  readonly seq: number;
  readonly receivedAt: number;
  readonly type: string | undefined;
  readonly status: string;
  /** The stored body, parsed. */
  readonly message: unknown;
}

/** What a plan would make of one stored message: `pass`, `flag` or `block`, and its violations (allowed ones included). */
export interface PreviewVerdict {
  readonly seq: number;
  readonly receivedAt: number;
  readonly type: string | undefined;
  readonly status: string;
  /** The track's event name, when it has one. */
  readonly event?: string;
  /** `skipped`: not a call a plan checks (a `delete`, or a rejected body). */
  readonly action: 'pass' | 'flag' | 'block' | 'skipped';
  readonly violations: readonly Violation[];
}

/** The marks a plan leaves in a stored message's context, removed so that only the plan previewed speaks. */
const PLAN_MARKS = ['trackingPlanId', 'trackingPlanVersion', 'violationErrors'];

/**
 * Checks stored messages against a plan as processing would, without
 * changing them or anything else: each is checked on a copy, stripped of the
 * marks the plan in force (if any) left in its context. A message that plan
 * already trimmed with `omit` is checked as stored, without what it lost.
 */
export function previewTrackingPlan(plan: CompiledPlan, messages: readonly PreviewInput[]): PreviewVerdict[] {
  return messages.map((stored) => {
    const base = { seq: stored.seq, receivedAt: stored.receivedAt, type: stored.type, status: stored.status };
    const body = stored.message;
    const event = isJsonObject(body) && typeof body['event'] === 'string' ? { event: body['event'] } : {};
    if (!isJsonObject(body) || !isCallType(stored.type)) return { ...base, ...event, action: 'skipped', violations: [] };
    const copy = structuredClone<JsonObject>(body);
    const context = copy['context'];
    if (isJsonObject(context)) for (const mark of PLAN_MARKS) delete context[mark];
    const verdict = checkAgainstPlan(plan, copy, stored.type);
    return { ...base, ...event, action: verdict.action, violations: verdict.violations };
  });
}
