import type { Database, Statement } from 'better-sqlite3';
import { type TrafficCount, type TrafficMetric, tally } from '../../domain/traffic.js';

/** The `traffic_minutes` counters (see src/domain/traffic.ts), written inside the callers' transactions. */
export class TrafficQueries {
  private readonly upsert: Statement<[number, string, string, number]>;
  private readonly sinceStatement: Statement<[number], { minute: number; metric: TrafficMetric; status: string; count: number }>;
  private readonly prune: Statement<[number]>;

  constructor(db: Database) {
    this.upsert = db.prepare(`
      INSERT INTO traffic_minutes (minute, metric, status, count) VALUES (?, ?, ?, ?)
      ON CONFLICT (minute, metric, status) DO UPDATE SET count = count + excluded.count`);
    this.sinceStatement = db.prepare(`SELECT minute, metric, status, count FROM traffic_minutes WHERE minute >= ? ORDER BY minute, metric, status`);
    this.prune = db.prepare(`DELETE FROM traffic_minutes WHERE minute < ?`);
  }

  /** Counts `events`; call inside the transaction that writes what they count. */
  add(metric: TrafficMetric, events: Iterable<{ readonly at: number; readonly status: string }>): void {
    for (const { minute, status, count } of tally(events)) this.upsert.run(minute, metric, status, count);
  }

  since(since: number): TrafficCount[] {
    return this.sinceStatement.all(since);
  }

  pruneBefore(before: number): number {
    return this.prune.run(before).changes;
  }
}
