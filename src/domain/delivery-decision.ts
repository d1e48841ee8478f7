import { type RetryPolicy, retryDelay } from './retry-policy.js';

/**
 * What became of one round of a delivery: the outcome classification of each
 * POST and the multi-receiver rule. Pure; the worker does the I/O.
 *
 * Glossary
 * - round: one claim of a delivery, POSTing in parallel to its receivers.
 * - verdict: how one POST ended: `success` (2xx), `retriable` (timeout,
 *   connection error, 5xx, 408, 429) or `final` (any other answer, a TLS
 *   certificate that does not verify, a refused private address).
 * - held: a receiver not POSTed to this round, because its circuit breaker is
 *   open or its origin has as many requests in flight as it may.
 */
export type Verdict = 'success' | 'retriable' | 'final';

/** The verdict of an HTTP answer. 3xx is final: redirects are never followed. */
export function verdictForStatus(statusCode: number): Verdict {
  if (statusCode >= 200 && statusCode < 300) return 'success';
  if (statusCode >= 500 || statusCode === 408 || statusCode === 429) return 'retriable';
  return 'final';
}

export interface SentResult {
  readonly url: string;
  readonly verdict: Verdict;
  /** For people: `HTTP 503`, `timeout after 5000 ms`, … */
  readonly summary: string;
  /** From a 429/503's Retry-After, in milliseconds. */
  readonly retryAfterMs?: number | undefined;
}

export interface HeldReceiver {
  readonly url: string;
  /** `circuit-open`: the receiver has been failing; `busy`: its origin is at its in-flight limit. */
  readonly reason: 'circuit-open' | 'busy';
  /** The earliest time it makes sense to try it again. */
  readonly until: number;
}

export interface DeliveryRound {
  /** When the round finished. */
  readonly now: number;
  /** When the round's POSTs started. */
  readonly startedAt: number;
  /** The delivery's first attempt before this round; undefined if it had none. */
  readonly firstAttemptAt: number | undefined;
  /** Rounds with POSTs before this one (the delivery's attempt count). */
  readonly previousRounds: number;
  readonly sent: readonly SentResult[];
  readonly held: readonly HeldReceiver[];
}

export type DeliveryDecision =
  | { readonly kind: 'succeeded' }
  | { readonly kind: 'failed'; readonly lastError: string }
  | { readonly kind: 'retry'; readonly nextAttemptAt: number; readonly retryUrls: readonly string[]; readonly lastError: string }
  | { readonly kind: 'deferred'; readonly nextAttemptAt: number };

/**
 * Applies the multi-receiver rule: once any receiver accepted the message it
 * is delivered and nobody is retried; otherwise the receivers that failed
 * retriably (and those held back) are retried with backoff until the retry
 * window, opened by the first attempt, closes. A round that sent nothing is
 * deferred without counting as an attempt, except that a delivery already
 * attempted whose receivers are all behind open circuits fails when its
 * window closes. Never-attempted deliveries wait for the circuit instead, so
 * nothing is lost while a receiver is down.
 */
export function decideDelivery(round: DeliveryRound, policy: RetryPolicy, random: () => number): DeliveryDecision {
  const { now, sent, held } = round;
  if (sent.some((r) => r.verdict === 'success')) return { kind: 'succeeded' };

  if (sent.length === 0) {
    if (held.length === 0) return { kind: 'failed', lastError: 'no receivers to send to' };
    const windowEnd = round.firstAttemptAt === undefined ? undefined : round.firstAttemptAt + policy.windowMs;
    if (windowEnd !== undefined && now >= windowEnd && held.every((h) => h.reason === 'circuit-open')) {
      return { kind: 'failed', lastError: `retry window closed while the circuit breaker held ${held.map((h) => h.url).join(', ')}` };
    }
    const until = Math.min(...held.map((h) => h.until));
    return { kind: 'deferred', nextAttemptAt: Math.max(now, windowEnd === undefined ? until : Math.min(until, windowEnd)) };
  }

  const failures = sent.map((r) => `${r.url}: ${r.summary}`).join('; ');
  const retriable = sent.filter((r) => r.verdict === 'retriable');
  const retryUrls = [...retriable.map((r) => r.url), ...held.map((h) => h.url)];
  if (retryUrls.length === 0) return { kind: 'failed', lastError: failures };

  const windowEnd = (round.firstAttemptAt ?? round.startedAt) + policy.windowMs;
  if (now >= windowEnd) return { kind: 'failed', lastError: `retry window closed; last round: ${failures}` };

  let delay: number;
  if (retriable.length > 0) {
    const retryAfter = Math.max(...retriable.map((r) => r.retryAfterMs ?? 0));
    delay = retryDelay(policy, round.previousRounds + 1, retryAfter, random);
  } else {
    delay = Math.max(0, Math.min(...held.map((h) => h.until)) - now);
  }
  // The last retry happens when the window closes rather than never.
  return { kind: 'retry', nextAttemptAt: Math.min(now + delay, windowEnd), retryUrls, lastError: failures };
}
