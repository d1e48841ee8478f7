import type { Violation } from './tracking-plan-check.js';

/**
 * Violation counts of a source's tracking plan
 * (`GET /sources/:id/tracking-plan/violations`): per hour, call type, event
 * and violation type, how many violations there were, with the latest
 * example. Counted by processing, added up per batch in memory and written
 * in the batch's transaction; bounded per source and hour. Pure: no I/O.
 */

export const VIOLATION_BOUNDS = Object.freeze({
  /** Distinct (call type, event, violation type) rows per source and hour; past it violations count as unrecorded. */
  rowsPerSource: 2_000,
  /** Event names are recorded cut to this length. */
  eventChars: 200,
});

export const HOUR_MS = 3_600_000;

export function hourOf(at: number): number {
  return Math.floor(at / HOUR_MS) * HOUR_MS;
}

/** The latest example of a row: the message, when it was received and the violation (JSON text). */
export interface ViolationExample {
  readonly messageId: string;
  readonly receivedAt: number;
  readonly violation: string;
}

export interface ViolationCount {
  readonly sourceId: string;
  readonly hour: number;
  /** Call type of the messages. */
  readonly type: string;
  /** A track's event name; '' for other calls. */
  readonly event: string;
  /** The violation type (`Datatype-Mismatch`, …). */
  readonly violation: string;
  readonly count: number;
  readonly example: ViolationExample;
}

/** The call type, event and violation of the row counting unrecorded violations (none of them is empty otherwise). */
export const UNRECORDED = '';

function rowKey(sourceId: string, hour: number, type: string, event: string, violation: string): string {
  return `${sourceId}\u0000${hour}\u0000${type}\u0000${event}\u0000${violation}`;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareRows(a: Omit<ViolationCount, 'count' | 'example'>, b: Omit<ViolationCount, 'count' | 'example'>): number {
  return compareText(a.sourceId, b.sourceId) || a.hour - b.hour || compareText(a.type, b.type) || compareText(a.event, b.event) || compareText(a.violation, b.violation);
}

/** A processing batch's violations, added up: one count per row key, the latest example kept. */
export class ViolationBatch {
  private readonly rows = new Map<string, { sourceId: string; hour: number; type: string; event: string; violation: string; count: number; example: ViolationExample }>();

  get isEmpty(): boolean {
    return this.rows.size === 0;
  }

  /** Adds a message's violations (as the plan reported them: at most the first 20). */
  add(sourceId: string, receivedAt: number, messageId: string, type: string, event: string, violations: readonly Violation[]): void {
    const hour = hourOf(receivedAt);
    const name = type === 'track' ? event.slice(0, VIOLATION_BOUNDS.eventChars) : '';
    for (const v of violations) {
      const key = rowKey(sourceId, hour, type, name, v.type);
      const row = this.rows.get(key);
      if (row === undefined) {
        this.rows.set(key, { sourceId, hour, type, event: name, violation: v.type, count: 1, example: { messageId, receivedAt, violation: JSON.stringify(v) } });
      } else {
        row.count++;
        // The first of its type in the latest message.
        if (receivedAt > row.example.receivedAt || (receivedAt === row.example.receivedAt && messageId !== row.example.messageId)) {
          row.example = { messageId, receivedAt, violation: JSON.stringify(v) };
        }
      }
    }
  }

  /** Sorted keys, for the store's look-up of what it holds. */
  keys(): Array<Omit<ViolationCount, 'count' | 'example'>> {
    return [...this.rows.values()].map(({ sourceId, hour, type, event, violation }) => ({ sourceId, hour, type, event, violation })).sort(compareRows);
  }

  all(): ViolationCount[] {
    return [...this.rows.values()];
  }
}

/** What the store holds for a batch's rows. */
export interface ViolationExisting {
  /** Rows per `${sourceId}\0${hour}` (unrecorded row excluded). */
  readonly rowsPerHour: ReadonlyMap<string, number>;
  /** Keys (source, hour, type, event, violation) already stored. */
  readonly known: ReadonlySet<string>;
}

export function violationRowKey(row: Omit<ViolationCount, 'count' | 'example'>): string {
  return rowKey(row.sourceId, row.hour, row.type, row.event, row.violation);
}

/**
 * What a batch writes: a row already stored adds to its count; a new row is
 * stored while its source's hour holds fewer than `bounds.rowsPerSource`
 * (biggest counts first); the rest add to that hour's unrecorded row.
 * Sorted by key: concurrent writers lock rows in one order.
 */
export function capViolations(batch: ViolationBatch, existing: ViolationExisting, bounds: { readonly rowsPerSource: number } = VIOLATION_BOUNDS): ViolationCount[] {
  const out: ViolationCount[] = [];
  const perHour = new Map(existing.rowsPerHour);
  const unrecorded = new Map<string, ViolationCount>();
  for (const row of batch.all().sort((a, b) => b.count - a.count || compareRows(a, b))) {
    if (!existing.known.has(violationRowKey(row))) {
      const hourKey = `${row.sourceId}\u0000${row.hour}`;
      const held = perHour.get(hourKey) ?? 0;
      if (held >= bounds.rowsPerSource) {
        const u = unrecorded.get(hourKey);
        if (u === undefined) unrecorded.set(hourKey, { ...row, type: UNRECORDED, event: UNRECORDED, violation: UNRECORDED });
        else unrecorded.set(hourKey, { ...u, count: u.count + row.count, example: row.example.receivedAt >= u.example.receivedAt ? row.example : u.example });
        continue;
      }
      perHour.set(hourKey, held + 1);
    }
    out.push(row);
  }
  return [...out, ...unrecorded.values()].sort(compareRows);
}

/** A period's rows as the store sums them (examples: the latest of each key). */
export type ViolationRows = ReadonlyArray<{ type: string; event: string; violation: string; count: number; example: ViolationExample }>;

export interface ViolationsView {
  readonly violations: Array<{
    event: string | null;
    callType: string;
    type: string;
    count: number;
    latest: { messageId: string; receivedAt: string; violation: unknown };
  }>;
  readonly truncated: boolean;
  readonly unrecordedViolations: number;
}

/** The admin's answer: rows by count (at most `bounds.rowsPerSource`; hours may each hold different ones). */
export function violationsView(rows: ViolationRows, bounds: { readonly rowsPerSource: number } = VIOLATION_BOUNDS): ViolationsView {
  let unrecorded = 0;
  const listed = rows.filter((r) => {
    if (r.violation !== UNRECORDED) return true;
    unrecorded += r.count;
    return false;
  });
  listed.sort((a, b) => b.count - a.count || compareText(a.type, b.type) || compareText(a.event, b.event) || compareText(a.violation, b.violation));
  const shown = listed.slice(0, bounds.rowsPerSource);
  return {
    violations: shown.map((r) => ({
      event: r.type === 'track' ? r.event : null,
      callType: r.type,
      type: r.violation,
      count: r.count,
      latest: { messageId: r.example.messageId, receivedAt: new Date(r.example.receivedAt).toISOString(), violation: JSON.parse(r.example.violation) as unknown },
    })),
    truncated: unrecorded > 0 || shown.length < listed.length,
    unrecordedViolations: unrecorded,
  };
}
