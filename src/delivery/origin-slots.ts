/**
 * Per-origin in-flight limits, so one slow receiver cannot take every
 * delivery slot and delay other receivers and sources.
 *
 * An origin has `perOrigin` slots. A request that finds them all taken
 * waits in memory, first come first served, for at most `waitMs`; a healthy
 * receiver frees slots long before that, so a backlog to it drains at full
 * speed. A request still waiting after `waitMs` gives up (the worker defers
 * its delivery in the store), which hands the worker's delivery slots back
 * to other receivers and sources within `waitMs` however slow this origin
 * is, and bounds how often such deliveries are re-read from the store. The
 * deferral grows with the origin's slowness and with how many requests were
 * turned away, so a large backlog is spread out in time.
 */
export interface OriginSlotsOptions {
  readonly perOrigin: number;
  /** Longest wait for a slot. */
  readonly waitMs: number;
  /**
   * Past a full round of waiters, a request whose wait the origin's pace
   * puts above this is turned away at once rather than queued.
   */
  readonly maxQueueMs: number;
  /** Upper bound of one deferral ({@link OriginSlots.holdUntil}). */
  readonly maxHoldMs: number;
}

interface Waiter {
  readonly origin: string;
  readonly stop: AbortSignal;
  /** performance.now() past which it gives up. */
  readonly deadline: number;
  readonly resolve: (granted: boolean) => void;
}

interface OriginLoad {
  active: number;
  readonly waiting: Waiter[];
  /** Moving average of answer times, once there is one. */
  latencyMs: number | undefined;
  /** Requests turned away since the origin last had a free slot. */
  turnedAway: number;
}

const LATENCY_WEIGHT = 0.2;
const MIN_HOLD_MS = 100;

/**
 * Waiters cost no timer and no abort listener of their own: a busy receiver
 * has a waiter for most deliveries, and per waiter a timer plus an
 * EventTarget listener added and removed were a measurable share of the
 * worker's CPU. Every waiter waits the same `waitMs`, so the waiters in
 * arrival order (`waiters`) are also in deadline order, and one timer, due
 * at the oldest one's deadline, serves them all; one listener per stop
 * signal turns its waiters away when it aborts.
 */
export class OriginSlots {
  private readonly origins = new Map<string, OriginLoad>();
  /** Every waiter of every origin, oldest first. */
  private readonly waiters = new Set<Waiter>();
  private readonly watchedSignals = new WeakSet<AbortSignal>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: OriginSlotsOptions) {}

  /**
   * Takes a slot of `origin`, waiting for one if need be. Resolves false
   * when none came free within `waitMs`, or when `stop` aborts.
   */
  acquire(origin: string, stop: AbortSignal): Promise<boolean> {
    let load = this.origins.get(origin);
    if (load === undefined) this.origins.set(origin, (load = { active: 0, waiting: [], latencyMs: undefined, turnedAway: 0 }));
    if (load.active < this.options.perOrigin) {
      load.active++;
      load.turnedAway = 0;
      return Promise.resolve(true);
    }
    if (stop.aborted) return Promise.resolve(false);
    if (this.queueIsLong(load)) {
      // Queued, it would hold one of the worker's deliveries for a long
      // while. Turned away, its delivery is deferred in the store, which
      // moves it behind other sources' due deliveries: claims are oldest due
      // first, so an origin's long backlog would otherwise be worked off
      // before anyone else's new messages (see the isolation tests).
      load.turnedAway++;
      return Promise.resolve(false);
    }
    this.watch(stop);
    const queue = load.waiting;
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = { origin, stop, deadline: performance.now() + this.options.waitMs, resolve };
      queue.push(waiter);
      this.waiters.add(waiter);
      this.armTimer();
    });
  }

  /** Turns `waiter` away (its wait is over, or its stop signal aborted). */
  private giveUp(waiter: Waiter): void {
    this.forget(waiter);
    const load = this.origins.get(waiter.origin);
    const index = load === undefined ? -1 : load.waiting.indexOf(waiter);
    if (index === -1) return;
    load!.waiting.splice(index, 1);
    load!.turnedAway++;
    waiter.resolve(false);
  }

  private forget(waiter: Waiter): void {
    this.waiters.delete(waiter);
    // Nobody left to time out: no timer to keep the process awake.
    if (this.waiters.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private watch(stop: AbortSignal): void {
    if (this.watchedSignals.has(stop)) return;
    this.watchedSignals.add(stop);
    stop.addEventListener('abort', () => {
      for (const waiter of this.waiters) if (waiter.stop === stop) this.giveUp(waiter);
    }, { once: true });
  }

  /** One timer, due at the oldest waiter's deadline; it turns away every waiter past its own. */
  private armTimer(): void {
    if (this.timer !== undefined) return;
    const oldest = this.waiters.values().next().value;
    if (oldest === undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = performance.now();
      for (const waiter of this.waiters) {
        if (waiter.deadline > now) break;
        this.giveUp(waiter);
      }
      this.armTimer();
    }, Math.max(0, oldest.deadline - performance.now()) + 1);
  }

  /**
   * Whether one more waiter would wait longer than `maxQueueMs`, by the
   * origin's pace (answer time ÷ slots). Never before a full round of
   * waiters, nor before the first answer (a receiver that has not answered
   * yet is bounded by `waitMs` instead).
   */
  private queueIsLong(load: OriginLoad): boolean {
    const waiting = load.waiting.length;
    if (waiting < this.options.perOrigin || load.latencyMs === undefined) return false;
    return ((waiting + 1) / this.options.perOrigin) * load.latencyMs > this.options.maxQueueMs;
  }

  /** Gives a slot back (to the longest waiter, if any); `latencyMs` when the request got an answer or timed out. */
  release(origin: string, latencyMs: number | undefined): void {
    const load = this.origins.get(origin);
    if (load === undefined) return;
    if (latencyMs !== undefined) {
      load.latencyMs = load.latencyMs === undefined ? latencyMs : load.latencyMs + LATENCY_WEIGHT * (latencyMs - load.latencyMs);
    }
    const next = load.waiting.shift();
    if (next !== undefined) {
      this.forget(next);
      next.resolve(true); // the slot passes on; `active` stays
      return;
    }
    load.active--;
    // Idle origins are forgotten, keeping the map as small as the set of busy receivers.
    if (load.active === 0) this.origins.delete(origin);
  }

  /** Until when a delivery turned away from `origin` should wait; `random` in [0, 1) spreads the waits. */
  holdUntil(origin: string, now: number, random: () => number): number {
    const load = this.origins.get(origin);
    const pace = Math.max(MIN_HOLD_MS, load?.latencyMs ?? this.options.waitMs);
    const crowd = 1 + (load?.turnedAway ?? 0) / this.options.perOrigin;
    return now + Math.round(Math.min(this.options.maxHoldMs, pace * crowd * (0.75 + random() / 2)));
  }

  inFlight(origin: string): number {
    return this.origins.get(origin)?.active ?? 0;
  }
}
