import v8 from 'node:v8';

/**
 * V8's fallback to its linear-time regular expression engine: a regular
 * expression that backtracks past a bound (50,000 backtracks by default) is
 * run again on an engine that cannot backtrack, in time linear in its input.
 * Tracking plans run their users' `pattern`s on every message of a source,
 * on the stage thread every source shares (and a plan preview runs them on
 * the server's main thread): one pattern such as `^(\w|\d)+$` against 40
 * characters that fail at the end would otherwise hold that thread for
 * hours. The save-time check (`domain/safe-pattern.ts`) refuses the classic
 * nested quantifiers, but no static check catches every pattern that
 * backtracks badly.
 *
 * The linear engine takes no backreferences or lookarounds (the save-time
 * check refuses those), no `u` flag (plans compile their patterns without
 * it where they can, `domain/tracking-plan.ts`) and no count above 16; a
 * pattern it cannot run must pass a stricter save-time rule instead
 * (`runsLinear` in `domain/safe-pattern.ts`). A process-wide V8 flag, read
 * when a regular expression runs, so worker threads have it too; set once,
 * before any plan is compiled, by `serve` and the CLI.
 */
export function enableLinearRegExpFallback(): void {
  if (enabled) return;
  v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');
  // V8's default is 50,000 backtracks before the fallback: a 33 KB call of
  // 1,500 short strings failing such a pattern then cost ~380 ms; at 1,000,
  // ~35 ms. A regular expression that backtracks less never notices.
  v8.setFlagsFromString(`--regexp-backtracks-before-fallback=${BACKTRACKS_BEFORE_FALLBACK}`);
  enabled = true;
}

const BACKTRACKS_BEFORE_FALLBACK = 1_000;

let enabled = false;
