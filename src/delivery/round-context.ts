import type { RetryPolicy } from '../domain/retry-policy.js';
import type { CircuitBreaker } from './circuit-breaker.js';
import type { OriginSlots } from './origin-slots.js';
import type { ReceiverRates } from './receiver-rates.js';

/** What every delivery round shares, whatever its destination kind: the worker's lease owner, retry policy, admission and clock. */
export interface SharedRoundContext {
  readonly owner: string;
  readonly policy: RetryPolicy;
  readonly breaker: CircuitBreaker;
  readonly slots: OriginSlots;
  readonly rates: ReceiverRates;
  readonly now: () => number;
  readonly random: () => number;
  /** Aborted when the worker stops; requests cut short by it are not recorded. */
  readonly stop: AbortSignal;
}
