import type { Database, Statement } from 'better-sqlite3';
import { type StatusChange, type TrafficCount, type TrafficMetric, recount, tally } from '../../domain/traffic.js';

/** The `traffic_minutes` counters (see src/domain/traffic.ts), written inside the callers' transactions. */
export class TrafficQueries {
  private readonly upsert: Statement<[number, string, string, number]>;
  private readonly take: Statement<[number, number, string, string]>;
  private readonly sinceStatement: Statement<[number], { minute: number; metric: TrafficMetric; status: string; count: number }>;
  private readonly prune: Statement<[number]>;

  constructor(db: Database) {
    this.upsert = db.prepare(`
      INSERT INTO traffic_minutes (minute, metric, status, count) VALUES (?, ?, ?, ?)
      ON CONFLICT (minute, metric, status) DO UPDATE SET count = count + excluded.count`);
    // Only from a counter that is there: a message received in a minute
    // already pruned, or before the counters existed, was not counted in it.
    this.take = db.prepare(`UPDATE traffic_minutes SET count = count + ? WHERE minute = ? AND metric = ? AND status = ?`);
    this.sinceStatement = db.prepare(`SELECT minute, metric, status, count FROM traffic_minutes WHERE minute >= ? ORDER BY minute, metric, status`);
    this.prune = db.prepare(`DELETE FROM traffic_minutes WHERE minute < ?`);
  }

  /** Counts `events`; call inside the transaction that writes what they count. */
  add(metric: TrafficMetric, events: Iterable<{ readonly at: number; readonly status: string }>): void {
    for (const { minute, status, count } of tally(events)) this.upsert.run(minute, metric, status, count);
  }

  /** Moves messages between statuses' counts (see `recount`); call inside the transaction that changes their statuses. */
  move(changes: Iterable<StatusChange>): void {
    for (const { minute, status, count } of recount(changes)) {
      if (count > 0) this.upsert.run(minute, 'messages', status, count);
      else this.take.run(count, minute, 'messages', status);
    }
  }

  since(since: number): TrafficCount[] {
    return this.sinceStatement.all(since);
  }

  pruneBefore(before: number): number {
    return this.prune.run(before).changes;
  }
}
