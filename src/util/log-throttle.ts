/**
 * Counts events of a few kinds (refused requests, refused connections) and
 * says when to log them: at most once per `everyMs`, with how many of each
 * kind came since the last log. A flood must not flood the log too.
 */
export class LogThrottle<Kind extends string> {
  private loggedAt = -Infinity;
  private since = new Map<Kind, number>();

  constructor(
    private readonly everyMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one event of `kind`; when a log is due, the counts since the last one (which start again from nothing). */
  count(kind: Kind): Partial<Record<Kind, number>> | undefined {
    this.since.set(kind, (this.since.get(kind) ?? 0) + 1);
    const at = this.now();
    if (at - this.loggedAt < this.everyMs) return undefined;
    this.loggedAt = at;
    const counts = Object.fromEntries(this.since) as Partial<Record<Kind, number>>;
    this.since = new Map();
    return counts;
  }
}
