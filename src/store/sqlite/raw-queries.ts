import type { Database, Statement } from 'better-sqlite3';
import type { AppendResult, IngestEntry, NewRawRequest, RawBacklog, RawRequest } from '../store.js';
import type { MessageQueries } from './message-queries.js';
import type { ObservationQueries } from './observation-queries.js';
import { observeEntries, observedAsBuilt } from '../observation-records.js';
import { type RawRequestRow, toRawRequest } from '../rows.js';

/** The highest seq of the raw requests not yet processed, 0 when none is (an expression). */
export const HIGHEST_RAW_SEQ = `(SELECT coalesce(max(seq), 0) FROM raw_requests)`;

/** The `raw_requests` table: what ingest stores before its 200, and the processing stage's reads and deletes. */
export class RawQueries {
  private readonly insertRaw: Statement<unknown[]>;
  private readonly oldest: Statement<[number], { seq: number; message_count: number }>;
  private readonly range: Statement<[number, number], RawRequestRow>;
  private readonly deleteUpTo: Statement<[number]>;
  private readonly countUpTo: Statement<[number], number>;
  private readonly lastTotal: Statement<[], number>;
  private readonly backlog: Statement<[], { first_seq: number; before_first: number; oldest: number; last_seq: number; last_total: number }>;
  private readonly highest: Statement<[], number>;
  private readonly upTo: Statement<[number]>;

  constructor(
    private readonly db: Database,
    private readonly messages: MessageQueries,
    private readonly observations: ObservationQueries,
  ) {
    this.insertRaw = db.prepare(`
      INSERT INTO raw_requests (source_id, route, received_at, ip, config_version, message_count, message_total, headers, body)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.lastTotal = db.prepare<[], number>(`SELECT message_total FROM raw_requests ORDER BY seq DESC LIMIT 1`).pluck();
    // Sizes first, bodies only of the rows taken: a batch's row is tens of KB.
    this.oldest = db.prepare(`SELECT seq, message_count FROM raw_requests ORDER BY seq LIMIT ?`);
    this.range = db.prepare(`SELECT * FROM raw_requests WHERE seq BETWEEN ? AND ? ORDER BY seq`);
    this.deleteUpTo = db.prepare(`DELETE FROM raw_requests WHERE seq <= ?`);
    this.countUpTo = db.prepare<[number], number>(`SELECT count(*) FROM raw_requests WHERE seq <= ?`).pluck();
    // Two lookups by key, whatever the backlog (see the migration that added message_total).
    this.backlog = db.prepare(`
      SELECT first.seq AS first_seq, first.message_total - first.message_count AS before_first, first.received_at AS oldest,
        last.seq AS last_seq, last.message_total AS last_total
      FROM (SELECT seq, message_total, message_count, received_at FROM raw_requests ORDER BY seq LIMIT 1) AS first,
        (SELECT seq, message_total FROM raw_requests ORDER BY seq DESC LIMIT 1) AS last`);
    this.highest = db.prepare<[], number>(`SELECT ${HIGHEST_RAW_SEQ}`).pluck();
    this.upTo = db.prepare(`SELECT 1 FROM raw_requests WHERE seq <= ? LIMIT 1`).pluck();
  }

  /**
   * Call inside a transaction. Each row's `message_total` continues the
   * last row's (from 0 when processing emptied the table: only differences
   * between rows present are ever read).
   */
  append(requests: readonly NewRawRequest[]): void {
    let total = this.lastTotal.get() ?? 0;
    for (const r of requests) {
      total += r.messageCount;
      this.insertRaw.run(r.sourceId, r.route, r.receivedAt, r.ip ?? null, r.configVersion, r.messageCount, total, r.headers ?? null, r.body);
    }
  }

  /**
   * The oldest raw requests within the limits (never none while any is
   * left), read outside any write: the store has one processor (one node),
   * so the oldest rows are its own. `cut` says a limit left rows behind.
   */
  oldestBatch(limits: { readonly maxRequests: number; readonly maxMessages: number }): { readonly taken: RawRequest[]; readonly cut: boolean } {
    let last: number | undefined;
    let count = 0;
    let messages = 0;
    // Cut short by a limit (or exactly at one): rows may be left.
    let cut = false;
    for (const row of this.oldest.iterate(limits.maxRequests + 1)) {
      if (count === limits.maxRequests || (count > 0 && messages + row.message_count > limits.maxMessages)) {
        cut = true;
        break;
      }
      messages += row.message_count;
      last = row.seq;
      count++;
    }
    if (last === undefined) return { taken: [], cut: false };
    return { taken: this.range.all(0, last).map(toRawRequest), cut };
  }

  /**
   * Call inside a transaction: whether the rows of {@link oldestBatch} are
   * still exactly the rows up to its last seq. Rows are never added below a
   * seq already handed out, only removed (a deleted source's, anywhere in
   * the table), so the same count means the same rows.
   */
  unchangedSince(taken: readonly RawRequest[]): boolean {
    return this.countUpTo.get(taken[taken.length - 1]!.seq) === taken.length;
  }

  /**
   * Call inside a transaction: stores the entries built from `taken` (all of
   * its rows, unchanged since they were read) and deletes the rows.
   * `observed`: the entries' observations as if none turned out a
   * duplicate, added up before the transaction; they are added up again
   * here only when some did (duplicates are not counted).
   */
  store(taken: readonly RawRequest[], entries: readonly IngestEntry[], dedupeSince: number, observed = observedAsBuilt(entries)): { results: AppendResult[]; deliveriesAdded: boolean } {
    const results = this.messages.appendInTransaction(entries, dedupeSince);
    const statuses = results.map((r) => r.status);
    this.observations.record(statuses.includes('duplicate') ? observeEntries(entries, statuses) : observed);
    this.deleteUpTo.run(taken[taken.length - 1]!.seq);
    const deliveriesAdded = results.some((r, i) => r.status === 'accepted' && entries[i]!.destinations.length > 0);
    return { results, deliveriesAdded };
  }

  /**
   * Rows are removed oldest first (processing) or by source (a deleted
   * source's, anywhere in the table): until processing has passed such a
   * gap, it is counted as if its rows were still there: the error only
   * ever overstates the backlog (a 503 a little early, never one missed).
   * The oldest row by seq stands for the oldest received (seqs follow
   * arrival, within a commit's few milliseconds).
   */
  backlogNow(): RawBacklog {
    const row = this.backlog.get();
    if (row === undefined) return { requests: 0, messages: 0, oldestReceivedAt: undefined };
    return { requests: row.last_seq - row.first_seq + 1, messages: row.last_total - row.before_first, oldestReceivedAt: row.oldest };
  }

  /** See Store.highestRawSeq: AUTOINCREMENT never hands a seq out twice. */
  highestSeq(): number {
    return this.highest.get()!;
  }

  hasUpTo(seq: number): boolean {
    return this.upTo.get(seq) !== undefined;
  }
}
