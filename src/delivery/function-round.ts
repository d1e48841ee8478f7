import { type HeldReceiver, type SentResult, decideDelivery } from '../domain/delivery-decision.js';
import { dropsFields, fieldsToDrop, isExemptFromFilters, removePaths } from '../domain/destination-filters.js';
import { isJsonObject } from '../domain/message.js';
import type { DestinationFilter } from '../domain/destination-filters.js';
import type { FunctionCallResult, FunctionRunner } from '../functions/function-runner.js';
import type { ClaimedDelivery, DeliveryOutcome, FunctionDestinationRecord } from '../store/store.js';
import { sleepUntil } from '../util/sleep-until.js';
import type { SharedRoundContext } from './round-context.js';

/** What a function destination's round needs of the worker. */
export interface FunctionRoundContext extends SharedRoundContext {
  /** The function destination as it is now (the SourceDirectory's view). */
  readonly destination: (functionId: string) => FunctionDestinationRecord | undefined;
  /** The source's filters, for their `dropFields`. */
  readonly filters: (sourceId: string) => readonly DestinationFilter[];
  /** Reads one version's code (when its isolate is not loaded). */
  readonly code: (functionId: string, version: number) => Promise<string | undefined>;
  readonly runner: FunctionRunner;
  // breaker: shared with receivers, keyed `function:<id>`; slots: the calls
  // one function destination may have in flight (they share its isolate).
  readonly onCall: (result: FunctionCallResult) => void;
}

/**
 * One round of a delivery to a function destination: runs the handler for
 * the message (through the destination's circuit breaker, one of its slots
 * and its `maxRequestsPerSecond`), and turns how the call ended into the
 * outcome to record, with the Webhooks destination's retry policy (the call
 * is one "receiver", `function:<id>`). Resolves, never rejects.
 */
export async function runFunctionRound(job: ClaimedDelivery, functionId: string, ctx: FunctionRoundContext): Promise<DeliveryOutcome> {
  const startedAt = ctx.now();
  const key = `function:${functionId}`;
  const common = { id: job.id, owner: ctx.owner };
  const fail = (lastError: string): DeliveryOutcome => ({ ...common, kind: 'failed', at: startedAt, firstAttemptAt: job.firstAttemptAt ?? startedAt, attempts: [], lastError });
  const fn = ctx.destination(functionId);
  // A job outlives a change of settings: the destination is read as it is now.
  if (fn === undefined || fn.sourceId !== job.sourceId) return fail('the function destination no longer exists');
  if (!fn.enabled) return fail(`the function destination "${fn.name}" is disabled; retry the delivery after enabling it`);
  const event = eventBody(job.body, ctx.filters(job.sourceId));
  if (event === undefined) return fail('the stored message is no longer readable (deleted or pruned)');

  if (fn.maxRequestsPerSecond !== undefined) {
    const rate = ctx.rates.reserve([{ url: key, maxRequestsPerSecond: fn.maxRequestsPerSecond, headers: {} }], startedAt);
    if ('deferUntil' in rate) return { ...common, kind: 'deferred', at: startedAt, nextAttemptAt: rate.deferUntil + Math.round(200 * ctx.random()) };
    if (rate.sendAt > startedAt && !(await sleepUntil(rate.sendAt, ctx))) return { ...common, kind: 'deferred', at: ctx.now(), nextAttemptAt: ctx.now() };
  }

  const admitted = await admit(key, ctx);
  if ('reason' in admitted) return decide(job, startedAt, [], [admitted], undefined, ctx);
  let result: FunctionCallResult;
  const callAt = ctx.now();
  try {
    let code: string | undefined = '';
    if (!ctx.runner.has(fn.id, fn.version)) code = await ctx.code(fn.id, fn.version);
    if (code === undefined) {
      result = { outcome: 'failed', error: `version ${fn.version} of the function's code is gone`, fetches: [], logs: [], durationMs: 0 };
    } else {
      result = await ctx.runner.run({ id: fn.id, version: fn.version, code }, event.body, fn.settings, { type: event.type });
    }
  } finally {
    // No answer time to pace the queue by, unlike a receiver's: a call's
    // time includes waiting for the isolate's one thread, which its own
    // calls beside it fill (pacing by it deferred much of a busy function's
    // backlog, claimed again and again). Waiters give up after the slot wait.
    ctx.slots.release(key, undefined);
  }
  ctx.breaker.record(key, result.outcome === 'retry' ? 'failure' : 'success', admitted.probe, ctx.now());
  ctx.onCall(result);
  const summary = result.outcome === 'delivered' ? 'delivered' : `${result.errorType === undefined ? '' : `${result.errorType}: `}${result.error ?? 'failed'}`;
  const sent: SentResult = { url: key, verdict: result.outcome === 'delivered' ? 'success' : result.outcome === 'retry' ? 'retriable' : 'final', summary };
  return decide(job, startedAt, [sent], [], { at: callAt, fn, result, summary }, ctx);
}

/** Through the breaker and a slot: `{probe}` when the call may go, or why it is held. */
async function admit(key: string, ctx: FunctionRoundContext): Promise<{ probe: boolean } | HeldReceiver> {
  const admittedAt = ctx.now();
  const admission = ctx.breaker.admit(key, admittedAt);
  if (admission.kind === 'hold') {
    const spread = Math.round((admission.until - admittedAt) * 0.5 * ctx.random());
    return { url: key, reason: 'circuit-open', until: admission.until + spread };
  }
  if (!(await ctx.slots.acquire(key, ctx.stop))) {
    const now = ctx.now();
    if (admission.probe) ctx.breaker.abandonProbe(key, now);
    return { url: key, reason: 'busy', until: ctx.stop.aborted ? now : ctx.slots.holdUntil(key, now, ctx.random) };
  }
  return { probe: admission.probe };
}

function decide(
  job: ClaimedDelivery,
  startedAt: number,
  sent: readonly SentResult[],
  held: readonly HeldReceiver[],
  call: { at: number; fn: FunctionDestinationRecord; result: FunctionCallResult; summary: string } | undefined,
  ctx: FunctionRoundContext,
): DeliveryOutcome {
  const now = ctx.now();
  const decision = decideDelivery({ now, startedAt, firstAttemptAt: job.firstAttemptAt, previousRounds: job.attemptCount, sent, held }, ctx.policy, ctx.random);
  const common = { id: job.id, owner: ctx.owner, at: now };
  if (decision.kind === 'deferred') return { ...common, kind: 'deferred', nextAttemptAt: decision.nextAttemptAt };
  const attempts =
    call === undefined
      ? []
      : [
          {
            at: call.at,
            url: `function:${call.fn.id}`,
            error: call.result.outcome === 'delivered' ? undefined : call.summary.slice(0, 2_000),
            durationMs: call.result.durationMs,
            functionRun: {
              version: call.fn.version,
              outcome: call.result.outcome,
              ...(call.result.errorType !== undefined && { errorType: call.result.errorType }),
              fetches: call.result.fetches,
              logs: call.result.logs,
            },
          },
        ];
  const recorded = { ...common, firstAttemptAt: job.firstAttemptAt ?? (call !== undefined ? startedAt : now), attempts };
  switch (decision.kind) {
    case 'succeeded':
      return { ...recorded, kind: 'succeeded' };
    case 'failed':
      return { ...recorded, kind: 'failed', lastError: decision.lastError };
    case 'retry':
      return { ...recorded, kind: 'retry', nextAttemptAt: decision.nextAttemptAt, retryUrls: decision.retryUrls, lastError: decision.lastError };
  }
}

/** The message as the handler gets it (as stored, less the paths of matching `dropFields` filters), and its `type`. */
function eventBody(stored: string, filters: readonly DestinationFilter[]): { readonly body: string; readonly type: unknown } | undefined {
  let message: unknown;
  try {
    message = JSON.parse(stored);
  } catch {
    return undefined;
  }
  if (!isJsonObject(message)) return undefined;
  const type = message['type'];
  if (filters.length === 0 || !dropsFields(filters) || isExemptFromFilters(message)) return { body: stored, type };
  const paths = fieldsToDrop(filters, message);
  if (paths.length === 0) return { body: stored, type };
  removePaths(message, paths);
  return { body: JSON.stringify(message), type: message['type'] };
}

