/**
 * One circuit breaker per receiver origin (`https://host:port`), so a dead
 * receiver is not hammered and does not tie up delivery slots.
 *
 * - closed: requests flow; `failureThreshold` retriable failures in a row
 *   open it.
 * - open: requests are held until `until`; then the first one through is the
 *   probe (half-open) and the others stay held while it runs.
 * - A success closes it, the probe's or any other's; a failed probe opens it
 *   again for twice as long, up to `maxOpenMs`.
 *
 * Answers that are not retriable failures (a 4xx: the receiver is up)
 * count as successes; errors that say nothing about the receiver's health (a
 * refused private address, an untrusted certificate) count as nothing.
 */
import { type HeldCircuit, circuitKind } from '../domain/circuits.js';

export interface CircuitBreakerOptions {
  readonly failureThreshold: number;
  /** How long it stays open the first time. */
  readonly openMs: number;
  readonly maxOpenMs: number;
  /** While a probe runs, how long other requests are held before asking again. */
  readonly probeHoldMs: number;
  /** A probe that never reported (its worker lost it) is given up after this long. */
  readonly probeTimeoutMs: number;
}

export type Admission = { readonly kind: 'allow'; readonly probe: boolean } | { readonly kind: 'hold'; readonly until: number };

export type HealthSignal = 'success' | 'failure' | 'neutral';

type OriginState =
  | { mode: 'closed'; failures: number }
  | { mode: 'open'; until: number; openMs: number }
  | { mode: 'half-open'; probeStartedAt: number; openMs: number };

export class CircuitBreaker {
  private readonly origins = new Map<string, OriginState>();

  /** `onOpened`: a closed circuit has just opened (a failed probe reopening one is not counted); never on the path of a request that goes. */
  constructor(
    private readonly options: CircuitBreakerOptions,
    private readonly onOpened?: (origin: string) => void,
  ) {}

  /** Whether a request to `origin` may go now; `probe` marks the one request a half-open circuit lets through. */
  admit(origin: string, now: number): Admission {
    const state = this.origins.get(origin);
    if (state === undefined || state.mode === 'closed') return { kind: 'allow', probe: false };
    if (state.mode === 'open') {
      if (now < state.until) return { kind: 'hold', until: state.until };
      this.origins.set(origin, { mode: 'half-open', probeStartedAt: now, openMs: state.openMs });
      return { kind: 'allow', probe: true };
    }
    if (now - state.probeStartedAt >= this.options.probeTimeoutMs) {
      state.probeStartedAt = now;
      return { kind: 'allow', probe: true };
    }
    return { kind: 'hold', until: now + this.options.probeHoldMs };
  }

  /** Reports how a request admitted at `admit` ended. */
  record(origin: string, signal: HealthSignal, probe: boolean, now: number): void {
    const state = this.origins.get(origin);
    if (signal === 'success') {
      // Closed with no failures is the default: forget the origin.
      this.origins.delete(origin);
      return;
    }
    if (state === undefined || state.mode === 'closed') {
      if (signal !== 'failure') return;
      const failures = (state?.failures ?? 0) + 1;
      if (failures >= this.options.failureThreshold) {
        this.open(origin, this.options.openMs, now);
        this.onOpened?.(origin);
      } else this.origins.set(origin, { mode: 'closed', failures });
      return;
    }
    // Answers to requests sent before the circuit opened change nothing; only the probe's do.
    if (!probe || state.mode !== 'half-open') return;
    this.open(origin, signal === 'failure' ? Math.min(state.openMs * 2, this.options.maxOpenMs) : state.openMs, now);
  }

  /** The probe admitted at `admit` was never sent (no slot came free): the next request may probe at once. */
  abandonProbe(origin: string, now: number): void {
    const state = this.origins.get(origin);
    if (state?.mode === 'half-open') this.origins.set(origin, { mode: 'open', until: now, openMs: state.openMs });
  }

  /** For logs and tests. */
  stateOf(origin: string): 'closed' | 'open' | 'half-open' {
    return this.origins.get(origin)?.mode ?? 'closed';
  }

  /** The circuits not closed now, at most `limit` of them: what an operator asks about (not on any request's path). */
  held(limit: number): HeldCircuit[] {
    const held: HeldCircuit[] = [];
    for (const [target, state] of this.origins) {
      if (held.length >= limit) break;
      if (state.mode === 'open') held.push({ target, state: 'open', until: state.until });
      else if (state.mode === 'half-open') held.push({ target, state: 'half-open' });
    }
    return held;
  }

  /** How many circuits are not closed now, receivers' and function destinations' apart (for `/metrics`, at scrape time). */
  heldCounts(): { receiver: number; function: number } {
    const counts = { receiver: 0, function: 0 };
    for (const [target, state] of this.origins) if (state.mode !== 'closed') counts[circuitKind(target)]++;
    return counts;
  }

  private open(origin: string, openMs: number, now: number): void {
    this.origins.set(origin, { mode: 'open', until: now + openMs, openMs });
  }
}
