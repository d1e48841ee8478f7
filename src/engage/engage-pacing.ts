import type { EventLoopUtilization } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** The longest rest between two passes. */
const MAX_REST_MS = 1_000;
/**
 * The shortest rest after a pass that did work: messages gather meanwhile,
 * and a page of many is one commit instead of several (most of a page's
 * cost is writing pages of the store, shared by its messages).
 */
const MIN_REST_MS = 50;
/** Idle share of the thread over a pass and its rest below which the thread was saturated. */
const SATURATED_BELOW = 0.04;
/** … and above which it no longer is. */
const UNSATURATED_ABOVE = 0.1;
/**
 * How long the thread must stay never idle, pass after pass, before it counts
 * as saturated for good (not a burst). Measured in time, not passes: a pass
 * and its rest can be 60 ms, and a checkpoint or a warming-up process fills
 * a few of those. Once Engage is behind, the work it leaves the others
 * fills its rests too, so too short a window throttles Engage exactly when
 * it must catch up: at 1 s, half of the `engage.latency` runs fell seconds
 * behind (p99 1.7-2.5 s); at 2 s, p99 0.15-0.68 s over four runs while
 * `engage.overhead` (ingest saturating the thread) kept 0.85; at 3 s it
 * fell to 0.81, and without the rule to 0.66.
 */
const SATURATED_AFTER_MS = 2_000;
/** Rest ÷ work while the thread is saturated: Engage then takes at most a fifth of it. */
const SATURATED_REST_FACTOR = 4;

/** When a pass began, to measure it. */
export interface PassStart {
  readonly at: number;
  readonly utilization: EventLoopUtilization;
}

/**
 * How much of its thread the Engage evaluator takes: the rest after each
 * pass. The SQLite store works synchronously and has one writer: without a
 * pause, catching up on a backlog would hold the write lock and the CPU
 * that ingest needs. After a pass that worked it rests as long as it worked
 * (at least MIN_REST_MS): at most half of its thread. When the thread was
 * never idle over a pass and its rest, the thread is saturated (ingest,
 * delivery and Engage share it on one core) pass after pass for two
 * seconds: Engage then rests four times as long and takes at most a fifth,
 * falling behind while ingest is saturated and catching up after. (Whether
 * the other work filled the rest says nothing: it does what waited during
 * the pass then.)
 */
export class EngagePacing {
  /** Since when every pass, with its rest, found the thread never idle; undefined: the last one did not. */
  private busySince: number | undefined;

  startPass(): PassStart {
    return { at: performance.now(), utilization: performance.eventLoopUtilization() };
  }

  /** The rest after a pass that worked; `behind`: more messages were waiting, so none need gather. */
  async restAfterWork(pass: PassStart, behind: boolean): Promise<void> {
    const saturated = this.busySince !== undefined && pass.at - this.busySince >= SATURATED_AFTER_MS;
    const factor = saturated ? SATURATED_REST_FACTOR : 1;
    const least = behind ? 0 : MIN_REST_MS;
    await sleep(Math.min(MAX_REST_MS, Math.max(least, (performance.now() - pass.at) * factor)));
    const idle = 1 - performance.eventLoopUtilization(pass.utilization).utilization;
    if (idle < SATURATED_BELOW || (saturated && idle < UNSATURATED_ABOVE)) this.busySince ??= pass.at;
    else this.busySince = undefined;
  }

  /** After a pass that found nothing to do: whatever kept the thread busy did not keep Engage behind. */
  async restCaughtUp(): Promise<void> {
    this.busySince = undefined;
    await nextTurn();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
