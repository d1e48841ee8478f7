/**
 * What every chaos scenario shares: its definition, the context the runner
 * hands it (quick or full, a log, a scope of cleanups) and the shape of its
 * result: the checks it made, the figures behind them and a verdict.
 */

export type Verdict = 'PASS' | 'FAIL' | 'SKIPPED';

export interface Check {
  readonly name: string;
  readonly pass: boolean;
  readonly detail: string;
}

export interface ScenarioResult {
  readonly verdict: Verdict;
  /** Why a scenario was skipped. */
  readonly reason?: string;
  readonly checks: readonly Check[];
  readonly figures: Readonly<Record<string, unknown>>;
}

export interface ScenarioContext {
  readonly quick: boolean;
  /** What the scenario is doing, for the human watching. */
  readonly log: (message: string) => void;
  /** Runs `action` when the scenario ends, however it ends (newest first). */
  readonly defer: (action: () => Promise<void> | void) => void;
}

export interface Scenario {
  readonly name: string;
  readonly summary: string;
  /** Upper bound on the whole scenario; past it the runner stops it and reports FAIL. */
  timeoutSec(quick: boolean): number;
  run(context: ScenarioContext): Promise<ScenarioResult>;
}

/** A scope of cleanups, run newest first, errors reported and swallowed. */
export class Scope {
  private readonly actions: Array<() => Promise<void> | void> = [];

  defer(action: () => Promise<void> | void): void {
    this.actions.push(action);
  }

  async close(log: (message: string) => void): Promise<void> {
    while (this.actions.length > 0) {
      const action = this.actions.pop();
      try {
        await action?.();
      } catch (error) {
        log(`cleanup failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
}

export function check(name: string, pass: boolean, detail: string): Check {
  return { name, pass, detail };
}

/** PASS when every check passed. */
export function verdictOf(checks: readonly Check[], figures: Record<string, unknown>): ScenarioResult {
  return { verdict: checks.every((c) => c.pass) ? 'PASS' : 'FAIL', checks, figures };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `test` every `everyMs` until it is true or `timeoutMs` passed; returns the last answer. */
export async function waitUntil(test: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 200): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await test()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(everyMs);
  }
}

export function percentile(sorted: readonly number[], percent: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(0, Math.ceil((percent / 100) * sorted.length) - 1);
  return round(sorted[Math.min(rank, sorted.length - 1)] ?? 0);
}

export interface Latencies {
  readonly count: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

export function summarize(values: readonly number[]): Latencies {
  const sorted = [...values].sort((a, b) => a - b);
  return { count: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99), max: round(sorted.at(-1) ?? 0) };
}

export function round(value: number, digits = 2): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
