import { type HeldReceiver, decideDelivery } from '../domain/delivery-decision.js';
import { webhookBody } from '../domain/webhook-payload.js';
import { withoutDroppedFields } from '../domain/destination-filters.js';
import type { StandardWebhooksSettings } from '../domain/standard-webhooks.js';
import type { WebhookDestination, WebhookReceiver } from '../domain/webhook-settings.js';
import type { ClaimedDelivery, DeliveryOutcome } from '../store/store.js';
import { type Tracing, startDeliveryAttempt } from '../telemetry/tracing.js';
import { functionIdOf } from '../domain/routing.js';
import { type FunctionRoundContext, runFunctionRound } from './function-round.js';
import { signBody, standardWebhookHeaders } from './signer.js';
import type { PostResult, WebhookSender } from './webhook-sender.js';
import { sleepUntil } from '../util/sleep-until.js';
import type { SharedRoundContext } from './round-context.js';

export interface RoundContext extends SharedRoundContext {
  readonly userAgent: string;
  /** The source's Webhooks destination as it is now, settings parsed (the SourceDirectory's view). */
  readonly destination: (sourceId: string) => WebhookDestination | undefined;
  readonly sender: WebhookSender;
  /** Called for every POST that is recorded. */
  readonly onPost: (result: PostResult) => void;
  /** On: a span per POST, child of the message's stored traceparent, sent to the receiver as `traceparent`. */
  readonly tracing: Tracing;
  /** Rounds of deliveries to function destinations (`function:<id>`); undefined: none can be made here. */
  readonly functions?: FunctionRoundContext | undefined;
}

/**
 * One round of one claimed delivery: maps and signs the payload, POSTs it in
 * parallel to the receivers it still needs (each through its origin's
 * circuit breaker and in-flight limit), and turns the answers into the
 * outcome to record. Resolves, never rejects.
 */
export async function runRound(job: ClaimedDelivery, ctx: RoundContext): Promise<DeliveryOutcome> {
  if (job.cancelled !== undefined) {
    // Never to be sent (its Engage computation was deleted): a final outcome,
    // which releases what waits behind it in an ordered key's chain.
    const at = ctx.now();
    return { kind: 'failed', id: job.id, owner: ctx.owner, at, firstAttemptAt: job.firstAttemptAt ?? at, attempts: [], lastError: job.cancelled };
  }
  const functionId = functionIdOf(job.destination);
  if (functionId !== undefined) {
    if (ctx.functions !== undefined) return runFunctionRound(job, functionId, ctx.functions);
    const at = ctx.now();
    return { kind: 'failed', id: job.id, owner: ctx.owner, at, firstAttemptAt: job.firstAttemptAt ?? at, attempts: [], lastError: 'function destinations are not available in this worker' };
  }
  const startedAt = ctx.now();
  const prepared = prepare(job, ctx.destination(job.sourceId));
  if (typeof prepared === 'string') {
    // Nothing can be sent: final, and requeueable by hand once fixed.
    return { kind: 'failed', id: job.id, owner: ctx.owner, at: startedAt, firstAttemptAt: job.firstAttemptAt ?? startedAt, attempts: [], lastError: prepared };
  }

  // Receivers' maxRequestsPerSecond: wait a little for a send time, or come back later.
  const rate = ctx.rates.reserve(prepared.targets, startedAt);
  if ('deferUntil' in rate) {
    const spread = Math.round(200 * ctx.random());
    return { kind: 'deferred', id: job.id, owner: ctx.owner, at: startedAt, nextAttemptAt: rate.deferUntil + spread };
  }
  if (rate.sendAt > startedAt && !(await sleepUntil(rate.sendAt, ctx))) {
    return { kind: 'deferred', id: job.id, owner: ctx.owner, at: ctx.now(), nextAttemptAt: ctx.now() };
  }

  const headers: Record<string, string> = { 'user-agent': ctx.userAgent, 'content-type': 'application/json' };
  if (prepared.sharedSecret !== undefined) headers['x-signature'] = signBody(prepared.body, prepared.sharedSecret);
  if (job.replayId !== undefined) headers['x-switchyard-replay'] = job.replayId;
  const signedAt = ctx.now();
  if (prepared.standardWebhooks !== undefined) {
    // Opt-in, so only these destinations pay for reading the messageId back out of the body.
    const messageId = (JSON.parse(prepared.body) as { messageId?: unknown }).messageId;
    // A body without one (a transformation's output may leave it out) is
    // told apart by its delivery, the same on every retry: one id for all
    // such bodies would make a receiver that skips repeated ids drop them.
    const id = typeof messageId === 'string' ? messageId : `sy_d${job.id}`;
    Object.assign(headers, standardWebhookHeaders(prepared.standardWebhooks, id, prepared.body, signedAt));
  }

  const outcomes = await Promise.all(prepared.targets.map((receiver) => sendTo(job, receiver, prepared.body, headers, ctx)));
  const now = ctx.now();
  const held: HeldReceiver[] = [];
  const sent: PostResult[] = [];
  for (const outcome of outcomes) {
    if ('reason' in outcome) held.push(outcome);
    // Cut short by a stop: try it again at once, on the next start.
    else if (outcome.aborted) held.push({ url: outcome.url, reason: 'busy', until: now });
    else {
      sent.push(outcome);
      ctx.onPost(outcome);
    }
  }
  const decision = decideDelivery(
    { now, startedAt, firstAttemptAt: job.firstAttemptAt, previousRounds: job.attemptCount, sent, held },
    ctx.policy,
    ctx.random,
  );
  const common = { id: job.id, owner: ctx.owner, at: now };
  if (decision.kind === 'deferred') return { ...common, kind: 'deferred', nextAttemptAt: decision.nextAttemptAt };
  const recorded = {
    ...common,
    firstAttemptAt: job.firstAttemptAt ?? (sent.length > 0 ? startedAt : now),
    attempts: sent.map((r) => ({ at: r.at, url: r.url, statusCode: r.statusCode, error: r.error, durationMs: r.durationMs, response: r.response })),
  };
  switch (decision.kind) {
    case 'succeeded':
      return { ...recorded, kind: 'succeeded' };
    case 'failed':
      return { ...recorded, kind: 'failed', lastError: decision.lastError };
    case 'retry':
      return { ...recorded, kind: 'retry', nextAttemptAt: decision.nextAttemptAt, retryUrls: decision.retryUrls, lastError: decision.lastError };
  }
}

/** POSTs to one receiver through its origin's circuit breaker and in-flight limit; held when either says not now. */
async function sendTo(job: ClaimedDelivery, receiver: WebhookReceiver, body: string, headers: Record<string, string>, ctx: RoundContext): Promise<PostResult | HeldReceiver> {
  const origin = ctx.sender.originOf(receiver.url);
  const admittedAt = ctx.now();
  const admission = ctx.breaker.admit(origin, admittedAt);
  if (admission.kind === 'hold') {
    // Spread the held deliveries so they do not all come back at the same instant.
    const spread = Math.round((admission.until - admittedAt) * 0.5 * ctx.random());
    return { url: receiver.url, reason: 'circuit-open', until: admission.until + spread };
  }
  if (!(await ctx.slots.acquire(origin, ctx.stop))) {
    const now = ctx.now();
    if (admission.probe) ctx.breaker.abandonProbe(origin, now);
    return { url: receiver.url, reason: 'busy', until: ctx.stop.aborted ? now : ctx.slots.holdUntil(origin, now, ctx.random) };
  }
  let result: PostResult;
  if (ctx.tracing.enabled) {
    const attempt = startDeliveryAttempt(ctx.tracing, { destination: 'webhooks', deliveryId: job.id, attempt: job.attemptCount + 1, traceparent: job.traceparent, url: receiver.url });
    // Ours last: a receiver's configured headers cannot break the trace. Not
    // part of any signature (both sign the body; Standard Webhooks also its id and timestamp).
    result = await ctx.sender.post(receiver.url, { ...headers, ...receiver.headers, ...attempt.headers }, body);
    attempt.finish(result.aborted ? { error: 'cut short: the worker is stopping' } : { statusCode: result.statusCode, error: result.error });
  } else {
    result = await ctx.sender.post(receiver.url, { ...headers, ...receiver.headers }, body);
  }
  ctx.slots.release(origin, result.health === 'neutral' || result.aborted ? undefined : result.durationMs);
  if (result.aborted) {
    if (admission.probe) ctx.breaker.abandonProbe(origin, ctx.now());
  } else {
    ctx.breaker.record(origin, result.health, admission.probe, ctx.now());
  }
  return result;
}

interface Prepared {
  readonly targets: readonly WebhookReceiver[];
  readonly body: string;
  readonly sharedSecret: string | undefined;
  readonly standardWebhooks: StandardWebhooksSettings | undefined;
}

/** What to send and where, or why nothing can be sent. */
function prepare(job: ClaimedDelivery, destination: WebhookDestination | undefined): Prepared | string {
  // A job outlives a change of settings: the destination is read as it is now.
  if (destination === undefined) return 'the source has no Webhooks destination any more';
  if (!destination.enabled) return 'the source\'s Webhooks destination is disabled; retry the delivery after enabling it';
  const settings = destination.check;
  if (!settings.ok) return `the Webhooks settings are invalid: ${settings.problem}`;
  // A transformation's output goes as it returned it (compact JSON); a
  // stored message as the webhook payload Segment's destination sends.
  let body = job.transformed === true ? job.body : webhookBody(job.body);
  if (body === undefined) return 'the stored message is no longer readable (deleted or pruned)';
  const filters = settings.settings.filters;
  if (filters !== undefined) body = withoutDroppedFields(body, filters);
  const receivers = settings.settings.webhooks;
  // Retry only the receivers still owed the message; if settings changed so
  // that none of them is configured any more, the current receivers get it.
  const owed = job.retryUrls === undefined ? receivers : receivers.filter((r) => job.retryUrls!.includes(r.url));
  return {
    targets: owed.length > 0 ? owed : receivers,
    body,
    sharedSecret: settings.settings.sharedSecret,
    standardWebhooks: settings.settings.standardWebhooks,
  };
}
