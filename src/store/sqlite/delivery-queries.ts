import type { Database, Statement, Transaction } from 'better-sqlite3';
import type {
  ClaimRequest,
  ClaimedDelivery,
  DeliveryDetail,
  DeliveryFilter,
  DeliveryOutcome,
  DeliveryRecord,
  RequeueFilter,
} from '../store.js';
import type { TrafficQueries } from './traffic-queries.js';
import { type AttemptRow, type ClaimRow, type DeliveryRow, toAttemptRecord, toClaimedDelivery, toDeliveryRecord } from '../rows.js';

/** The delivery queue: claims with leases, outcomes, and the admin views of it. */
export class DeliveryQueries {
  private readonly claimTx: Transaction<(request: ClaimRequest) => ClaimedDelivery[]>;
  private readonly finishTx: Transaction<(outcomes: readonly DeliveryOutcome[]) => void>;
  /** Claims and reads each claimed job's message body in one statement. */
  private readonly lease: Statement<[string, number, number, number, number], ClaimRow>;
  private readonly finish: Statement<unknown[]>;
  private readonly defer: Statement<[number, number, number, string]>;
  private readonly insertAttempt: Statement<unknown[]>;
  private readonly nextDue: Statement<[], { due: number | null }>;

  constructor(
    private readonly db: Database,
    private readonly traffic: TrafficQueries,
  ) {
    // Leasing moves next_attempt_at to the lease's end: see the schema.
    this.lease = db.prepare(`
      UPDATE deliveries SET lease_owner = ?, next_attempt_at = ?, updated_at = ?
      WHERE id IN (
        SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_at <= ?
        ORDER BY next_attempt_at LIMIT ?)
      RETURNING *, (SELECT body FROM messages WHERE seq = message_seq) AS body`);
    this.finish = db.prepare(`
      UPDATE deliveries SET status = ?, attempt_count = attempt_count + 1, first_attempt_at = ?,
        next_attempt_at = ?, retry_urls = ?, last_error = ?, lease_owner = NULL, updated_at = ?
      WHERE id = ? AND lease_owner = ? AND status = 'pending'`);
    this.defer = db.prepare(`
      UPDATE deliveries SET next_attempt_at = ?, lease_owner = NULL, updated_at = ?
      WHERE id = ? AND lease_owner = ? AND status = 'pending'`);
    this.insertAttempt = db.prepare(`
      INSERT INTO delivery_attempts (delivery_id, at, url, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?)`);
    this.nextDue = db.prepare(`SELECT MIN(next_attempt_at) AS due FROM deliveries WHERE status = 'pending'`);

    this.claimTx = db.transaction((request: ClaimRequest) => {
      const rows = this.lease.all(request.owner, request.now + request.leaseMs, request.now, request.now, request.limit);
      rows.sort((a, b) => a.id - b.id);
      return rows.map(toClaimedDelivery);
    });
    this.finishTx = db.transaction((outcomes: readonly DeliveryOutcome[]) => {
      const rounds: Array<{ at: number; status: string }> = [];
      for (const outcome of outcomes) {
        if (this.finishOne(outcome) && outcome.kind !== 'deferred') rounds.push({ at: outcome.at, status: outcome.kind === 'retry' ? 'retried' : outcome.kind });
      }
      this.traffic.add('deliveries', rounds);
    });
  }

  claim(request: ClaimRequest): ClaimedDelivery[] {
    return this.claimTx.immediate(request);
  }

  finishAll(outcomes: readonly DeliveryOutcome[]): void {
    this.finishTx.immediate(outcomes);
  }

  /** Resolves whether the outcome applied (its owner still held the lease). */
  private finishOne(outcome: DeliveryOutcome): boolean {
    if (outcome.kind === 'deferred') {
      return this.defer.run(outcome.nextAttemptAt, outcome.at, outcome.id, outcome.owner).changes > 0;
    }
    const retry = outcome.kind === 'retry';
    const changed = this.finish.run(
      retry ? 'pending' : outcome.kind,
      outcome.firstAttemptAt,
      retry ? outcome.nextAttemptAt : null,
      retry ? JSON.stringify(outcome.retryUrls) : null,
      outcome.lastError ?? null,
      outcome.at,
      outcome.id,
      outcome.owner,
    ).changes;
    if (changed === 0) return false;
    for (const attempt of outcome.attempts) {
      this.insertAttempt.run(outcome.id, attempt.at, attempt.url, attempt.statusCode ?? null, attempt.error ?? null, Math.round(attempt.durationMs));
    }
    return true;
  }

  releaseLeases(keepOwner: string, now: number): number {
    return this.db
      .prepare(`
        UPDATE deliveries SET lease_owner = NULL, next_attempt_at = ?, updated_at = ?
        WHERE status = 'pending' AND lease_owner IS NOT NULL AND lease_owner <> ?`)
      .run(now, now, keepOwner).changes;
  }

  nextDueAt(): number | undefined {
    return this.nextDue.get()?.due ?? undefined;
  }

  list(filter: DeliveryFilter): DeliveryRecord[] {
    const rows = this.db
      .prepare(`
        SELECT d.*, m.message_id FROM deliveries d LEFT JOIN messages m ON m.seq = d.message_seq
        WHERE (@sourceId IS NULL OR d.source_id = @sourceId)
          AND (@status IS NULL OR d.status = @status)
          AND (@beforeId IS NULL OR d.id < @beforeId)
        ORDER BY d.id DESC LIMIT @limit`)
      .all({
        sourceId: filter.sourceId ?? null,
        status: filter.status ?? null,
        beforeId: filter.beforeId ?? null,
        limit: filter.limit,
      }) as DeliveryRow[];
    return rows.map(toDeliveryRecord);
  }

  get(id: number): DeliveryDetail | undefined {
    const row = this.db
      .prepare(`SELECT d.*, m.message_id FROM deliveries d LEFT JOIN messages m ON m.seq = d.message_seq WHERE d.id = ?`)
      .get(id) as DeliveryRow | undefined;
    if (row === undefined) return undefined;
    const attempts = this.db
      .prepare(`SELECT at, url, status_code, error, duration_ms FROM delivery_attempts WHERE delivery_id = ? ORDER BY id`)
      .all(id) as AttemptRow[];
    return { ...toDeliveryRecord(row), attempts: attempts.map(toAttemptRecord) };
  }

  requeueFailed(filter: RequeueFilter, now: number): number {
    return this.db
      .prepare(`
        UPDATE deliveries SET status = 'pending', next_attempt_at = @now, first_attempt_at = NULL,
          retry_urls = NULL, lease_owner = NULL, updated_at = @now
        WHERE status = 'failed'
          AND (@id IS NULL OR id = @id)
          AND (@sourceId IS NULL OR source_id = @sourceId)
          AND (@since IS NULL OR updated_at >= @since)`)
      .run({ now, id: filter.id ?? null, sourceId: filter.sourceId ?? null, since: filter.since ?? null }).changes;
  }
}

