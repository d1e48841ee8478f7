// The observed schema and violation counts (see src/store/observation-records.ts), written inside the processing transaction.
import type { Database, Statement } from 'better-sqlite3';
import { capObserved, eventKey, type ObservedEventRow, type ObservedPathRow, type ObservedPosition, pathKey, UNRECORDED_TYPE } from '../../domain/observed-schema.js';
import { capViolations, type ViolationRows, violationRowKey } from '../../domain/plan-violation-counts.js';
import type { Observations } from '../observation-records.js';

const PRUNE_BATCH = 5_000;

export class ObservationQueries {
  private readonly eventsOfDay: Statement<[string, number], number>;
  private readonly eventExists: Statement<[string, number, string, string], number>;
  private readonly pathsOfEvent: Statement<[string, number, string, string], number>;
  private readonly pathExists: Statement<[string, number, string, string, string], number>;
  private readonly upsertEvent: Statement<[string, number, string, string, number, number]>;
  private readonly upsertPath: Statement<[string, number, string, string, string, number, number]>;
  private readonly rowsOfHour: Statement<[string, number], number>;
  private readonly violationExists: Statement<[string, number, string, string, string], number>;
  private readonly upsertViolation: Statement<[string, number, string, string, string, number, string, number, string]>;

  constructor(private readonly db: Database) {
    this.eventsOfDay = db.prepare<[string, number], number>(`SELECT count(*) FROM observed_events WHERE source_id = ? AND day = ? AND type <> ''`).pluck();
    this.eventExists = db.prepare<[string, number, string, string], number>(`SELECT 1 FROM observed_events WHERE source_id = ? AND day = ? AND type = ? AND event = ?`).pluck();
    this.pathsOfEvent = db.prepare<[string, number, string, string], number>(`SELECT count(*) FROM observed_paths WHERE source_id = ? AND day = ? AND type = ? AND event = ?`).pluck();
    this.pathExists = db
      .prepare<[string, number, string, string, string], number>(`SELECT 1 FROM observed_paths WHERE source_id = ? AND day = ? AND type = ? AND event = ? AND path = ?`)
      .pluck();
    this.upsertEvent = db.prepare(`
      INSERT INTO observed_events (source_id, day, type, event, count, paths_truncated) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (source_id, day, type, event) DO UPDATE SET count = count + excluded.count, paths_truncated = max(paths_truncated, excluded.paths_truncated)`);
    this.upsertPath = db.prepare(`
      INSERT INTO observed_paths (source_id, day, type, event, path, types, count) VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (source_id, day, type, event, path) DO UPDATE SET types = types | excluded.types, count = count + excluded.count`);
    this.rowsOfHour = db.prepare<[string, number], number>(`SELECT count(*) FROM plan_violations WHERE source_id = ? AND hour = ? AND violation <> ''`).pluck();
    this.violationExists = db
      .prepare<[string, number, string, string, string], number>(`SELECT 1 FROM plan_violations WHERE source_id = ? AND hour = ? AND type = ? AND event = ? AND violation = ?`)
      .pluck();
    this.upsertViolation = db.prepare(`
      INSERT INTO plan_violations (source_id, hour, type, event, violation, count, example_message_id, example_received_at, example) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (source_id, hour, type, event, violation) DO UPDATE SET count = count + excluded.count,
        example_message_id = CASE WHEN excluded.example_received_at >= example_received_at THEN excluded.example_message_id ELSE example_message_id END,
        example = CASE WHEN excluded.example_received_at >= example_received_at THEN excluded.example ELSE example END,
        example_received_at = max(example_received_at, excluded.example_received_at)`);
  }

  /**
   * Adds a processing batch's observations, added up in memory by
   * `observeEntries` (a row is written once per batch, not per
   * message); call inside its transaction. The look-ups of what is held
   * (for the caps) are by primary key.
   */
  record({ schema, violations }: Observations): void {
    if (!schema.isEmpty) {
      const eventsPerDay = new Map<string, number>();
      const knownEvents = new Set<string>();
      const pathsPerEvent = new Map<string, number>();
      const knownPaths = new Set<string>();
      for (const k of schema.eventKeys()) {
        const dayKey = `${k.sourceId}\u0000${k.day}`;
        if (!eventsPerDay.has(dayKey)) eventsPerDay.set(dayKey, this.eventsOfDay.get(k.sourceId, k.day) ?? 0);
        if (this.eventExists.get(k.sourceId, k.day, k.type, k.event) !== undefined) {
          const key = eventKey(k.sourceId, k.day, k.type, k.event);
          knownEvents.add(key);
          pathsPerEvent.set(key, this.pathsOfEvent.get(k.sourceId, k.day, k.type, k.event) ?? 0);
        }
      }
      for (const k of schema.pathKeys()) {
        if (!knownEvents.has(eventKey(k.sourceId, k.day, k.type, k.event))) continue;
        if (this.pathExists.get(k.sourceId, k.day, k.type, k.event, k.path) !== undefined) knownPaths.add(pathKey(k.sourceId, k.day, k.type, k.event, k.path));
      }
      const writes = capObserved(schema, { eventsPerDay, knownEvents, pathsPerEvent, knownPaths });
      for (const e of writes.events) this.upsertEvent.run(e.sourceId, e.day, e.type, e.event, e.count, e.pathsTruncated ? 1 : 0);
      for (const u of writes.unrecorded) this.upsertEvent.run(u.sourceId, u.day, UNRECORDED_TYPE, '', u.count, 0);
      for (const p of writes.paths) this.upsertPath.run(p.sourceId, p.day, p.type, p.event, p.path, p.types, p.count);
    }
    if (!violations.isEmpty) {
      const rowsPerHour = new Map<string, number>();
      const known = new Set<string>();
      for (const k of violations.keys()) {
        const hourKey = `${k.sourceId}\u0000${k.hour}`;
        if (!rowsPerHour.has(hourKey)) rowsPerHour.set(hourKey, this.rowsOfHour.get(k.sourceId, k.hour) ?? 0);
        if (this.violationExists.get(k.sourceId, k.hour, k.type, k.event, k.violation) !== undefined) known.add(violationRowKey(k));
      }
      for (const v of capViolations(violations, { rowsPerHour, known })) {
        this.upsertViolation.run(v.sourceId, v.hour, v.type, v.event, v.violation, v.count, v.example.messageId, v.example.receivedAt, v.example.violation);
      }
    }
  }

  /**
   * `day IN (…)`: one index seek per day on the primary key (source, day,
   * type, event…), so an event's rows are found without reading the day's
   * other events. BINARY collation: code point order, as PostgreSQL's "C".
   */
  observedEvents(sourceId: string, days: readonly number[], after: ObservedPosition | undefined, limit: number): { events: ObservedEventRow[]; unrecordedMessages: number } {
    if (days.length === 0) return { events: [], unrecordedMessages: 0 };
    const inDays = `day IN (${days.map(() => '?').join(', ')})`;
    const having = after === undefined ? '' : 'HAVING sum(count) < ? OR (sum(count) = ? AND (type > ? OR (type = ? AND event > ?)))';
    const events = this.db
      .prepare(`
        SELECT type, event, sum(count) AS count, max(paths_truncated) AS pt FROM observed_events
        WHERE source_id = ? AND ${inDays} AND type <> '' GROUP BY type, event ${having}
        ORDER BY sum(count) DESC, type, event LIMIT ?`)
      .all(sourceId, ...days, ...(after === undefined ? [] : [after.count, after.count, after.type, after.type, after.event]), limit) as Array<{
      type: string;
      event: string;
      count: number;
      pt: number;
    }>;
    const unrecorded = this.db.prepare(`SELECT coalesce(sum(count), 0) FROM observed_events WHERE source_id = ? AND ${inDays} AND type = ''`).pluck().get(sourceId, ...days) as number;
    return { events: events.map((e) => ({ type: e.type, event: e.event, count: e.count, pathsTruncated: e.pt === 1 })), unrecordedMessages: unrecorded };
  }

  observedPaths(sourceId: string, days: readonly number[], events: ReadonlyArray<{ type: string; event: string }>, perEvent: number): ObservedPathRow[] {
    if (days.length === 0 || events.length === 0) return [];
    // No bitwise-OR aggregate in SQLite: OR the per-bit maxima.
    const bits = [1, 2, 4, 8, 16, 32, 64].map((bit) => `max(types & ${bit})`).join(' | ');
    const statement = this.db.prepare(`
      SELECT type, event, path, ${bits} AS types, sum(count) AS count FROM observed_paths
      WHERE source_id = ? AND day IN (${days.map(() => '?').join(', ')}) AND type = ? AND event = ?
      GROUP BY path ORDER BY path LIMIT ?`);
    const rows: ObservedPathRow[] = [];
    for (const e of events) rows.push(...(statement.all(sourceId, ...days, e.type, e.event, perEvent) as ObservedPathRow[]));
    return rows;
  }

  violationCounts(sourceId: string, sinceHour: number): ViolationRows {
    // SQLite takes the bare columns of a max() aggregate from the row holding the maximum: the latest example.
    const rows = this.db
      .prepare(`
        SELECT type, event, violation, sum(count) AS count, max(example_received_at) AS at, example_message_id, example
        FROM plan_violations WHERE source_id = ? AND hour >= ? GROUP BY type, event, violation`)
      .all(sourceId, sinceHour) as Array<{ type: string; event: string; violation: string; count: number; at: number; example_message_id: string; example: string }>;
    return rows.map((r) => ({
      type: r.type,
      event: r.event,
      violation: r.violation,
      count: r.count,
      example: { messageId: r.example_message_id, receivedAt: r.at, violation: r.example },
    }));
  }

  /** One batch per table; returns how many rows went (0: nothing left). */
  pruneBatch(schemaBefore: number, violationsBefore: number): number {
    let removed = 0;
    for (const [table, key, column, before] of [
      ['observed_paths', 'source_id, day, type, event, path', 'day', schemaBefore],
      ['observed_events', 'source_id, day, type, event', 'day', schemaBefore],
      ['plan_violations', 'source_id, hour, type, event, violation', 'hour', violationsBefore],
    ] as const) {
      // WITHOUT ROWID tables: a batch named by primary key.
      removed += this.db.prepare(`DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE ${column} < ? LIMIT ?)`).run(before, PRUNE_BATCH).changes;
    }
    return removed;
  }
}
