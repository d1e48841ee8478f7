/**
 * When a failed delivery is tried again: randomized exponential backoff
 * inside a retry window that opens with the first attempt. Pure; callers pass
 * the clock and the random source.
 */
export interface RetryPolicy {
  /** Delay after the first failed round (before jitter); doubles each round. */
  readonly baseMs: number;
  /** Cap on one delay, Retry-After included. */
  readonly maxDelayMs: number;
  /** Retries stop this long after the first attempt. */
  readonly windowMs: number;
}

/**
 * Delay after `failedRounds` failed rounds (1 after the first attempt), with
 * "equal jitter": half of the exponential step is kept and half is random.
 * Keeping a floor avoids the near-zero delays of full jitter, which would
 * hammer a receiver that just failed; the random half spreads out the
 * retries of many messages that failed together.
 */
export function backoffDelay(policy: RetryPolicy, failedRounds: number, random: () => number): number {
  const exponent = Math.min(Math.max(failedRounds - 1, 0), 52);
  const step = Math.min(policy.maxDelayMs, policy.baseMs * 2 ** exponent);
  return Math.round(step / 2 + (random() * step) / 2);
}

/**
 * The delay before the next round: the backoff, or the receivers' Retry-After
 * when that is longer, capped at `maxDelayMs` either way (a receiver cannot
 * park a message past the cap).
 */
export function retryDelay(policy: RetryPolicy, failedRounds: number, retryAfterMs: number | undefined, random: () => number): number {
  return Math.min(policy.maxDelayMs, Math.max(backoffDelay(policy, failedRounds, random), retryAfterMs ?? 0));
}

const MAX_RETRY_AFTER_SECONDS = 366 * 24 * 3_600;

/**
 * A `Retry-After` header as milliseconds from `now`: delay-seconds or an
 * HTTP-date (RFC 9110 §10.2.3). Undefined when absent or unreadable; a date
 * in the past means "now" (0).
 */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text), MAX_RETRY_AFTER_SECONDS) * 1_000;
  if (text.length > 64 || !/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}
