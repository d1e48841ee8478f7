// How far the message stream can be read without a later commit filling a gap below what was read.
import type pg from 'pg';
import type { SettledSeqRead } from '../store.js';

/**
 * `messages.seq` comes from an identity sequence, and `nextval` is not
 * transactional: a transaction can take seq 103, another take 105 and commit
 * first, and a reader then sees 105 without 103. A reader that moves a
 * cursor past 105 (Engage's stream, the debugger's, a replay's) never sees
 * 103. A rolled-back transaction's seqs never appear at all.
 *
 * Settled: every seq at or below it is committed or never will be. Found in
 * three steps:
 *   A. read the highest seq handed out so far, L;
 *   B. then (a statement after A returned) list the transaction ids running now;
 *   C. once none of them is running any more, L is settled.
 * A read waits for C a short while; if it is not reached, L and the ids are
 * kept, and a later read settles L as soon as those transactions have
 * ended, whatever else runs by then.
 * A transaction holding a seq at or below L took it before A. If it already
 * had its transaction id then (see {@link WRITE_BEGIN}), it was running at B
 * or had ended; after C it has ended: its seqs are visible to any statement
 * that starts later, or will never exist.
 *
 * A writer that holds its transaction open holds the settled seq back for as
 * long as it does: what is settled waits for the slowest writer running at
 * B. Processing, Engage and regulation transactions last milliseconds; a
 * stall (a slow fsync, a lock wait) delays the readers, it loses nothing.
 * `pg_stat_activity.backend_xid` is shown to every role (checked on
 * PostgreSQL 15 with two unprivileged roles).
 */
export class SettledSeq {
  private settled = 0;
  /**
   * Highest seqs read earlier that are not settled yet, oldest first, each
   * with the writers it still waits for. Kept from read to read: a read
   * waits at most `waitMs`, and writers that each last longer but overlap
   * (nodes queued on processing's advisory lock, which they wait for after
   * taking their transaction id) would otherwise keep every read from
   * settling anything, for good.
   */
  private readonly candidates: Array<{ readonly seq: number; readonly waitingFor: Set<string> }> = [];
  /** The read under way, and the one queued to start after it (shared by every caller meanwhile). */
  private current: Promise<SettledSeqRead> | undefined;
  private queued: Promise<SettledSeqRead> | undefined;

  constructor(
    /** How long one call waits for the writers running at B to end before it answers with what was settled before. */
    private readonly waitMs = 200,
    private readonly pollMs = 5,
  ) {}

  /**
   * The settled seq, and whether writers running now may still settle a
   * higher one (the caller should look again soon).
   */
  read(pool: pg.Pool): Promise<SettledSeqRead> {
    if (this.current === undefined) return this.start(pool);
    // Callers at once share one read (each debugger stream asks on every
    // commit). Not the read under way: it may have read the highest seq
    // before the commit that made the caller ask. The next one starts after.
    this.queued ??= this.current
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.start(pool);
      });
    return this.queued;
  }

  private start(pool: pg.Pool): Promise<SettledSeqRead> {
    const run = this.readOnce(pool).finally(() => {
      if (this.current === run) this.current = undefined;
    });
    this.current = run;
    return run;
  }

  private async readOnce(pool: pg.Pool): Promise<SettledSeqRead> {
    const allocated = await highestAllocated(pool);
    // Only candidates kept before the list was asked for may be pruned by
    // it: one another read pushes meanwhile may wait for a transaction that
    // began after this list was taken.
    const earlier = [...this.candidates];
    const running = new Set(await runningTransactions(pool));
    // What earlier reads waited for and that is no longer running has ended.
    for (const candidate of earlier) for (const xid of candidate.waitingFor) if (!running.has(xid)) candidate.waitingFor.delete(xid);
    this.candidates.push({ seq: allocated, waitingFor: running });
    // Full: drop the newest but one, never the oldest (the nearest to settling).
    if (this.candidates.length > MAX_CANDIDATES) this.candidates.splice(-2, 1);
    const deadline = Date.now() + this.waitMs;
    while (running.size > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, this.pollMs));
      // Only what was asked about: another read may push candidates while this one waits.
      const asked = this.waitedFor();
      const still = new Set(await stillRunning(pool, [...asked]));
      for (const candidate of this.candidates) for (const xid of candidate.waitingFor) if (asked.has(xid) && !still.has(xid)) candidate.waitingFor.delete(xid);
    }
    // Seqs only grow, so the last candidate whose writers have all ended settles every one before it.
    const last = this.candidates.findLastIndex((candidate) => candidate.waitingFor.size === 0);
    if (last >= 0) {
      this.settled = Math.max(this.settled, this.candidates[last]!.seq);
      this.candidates.splice(0, last + 1);
    }
    return { seq: this.settled, settling: this.candidates.length > 0 };
  }

  private waitedFor(): Set<string> {
    const all = new Set<string>();
    for (const candidate of this.candidates) for (const xid of candidate.waitingFor) all.add(xid);
    return all;
  }
}

/** Unsettled highest seqs kept at most; dropping one only delays what is settled (a later one settles it too). */
const MAX_CANDIDATES = 32;

/**
 * How every transaction that may insert messages begins: it takes its
 * transaction id before it takes any seq, so that {@link SettledSeq} sees it
 * running from then on. Without it, a transaction gets its id only at its
 * first row write, after the sequence handed it a seq: in between, a reader
 * could count that seq as settled.
 */
export const WRITE_BEGIN = 'BEGIN; SELECT txid_current()';

async function highestAllocated(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ seq: string | null }>(
    `SELECT pg_sequence_last_value(pg_get_serial_sequence('messages', 'seq')::regclass) AS seq`,
  );
  return Number(rows[0]?.seq ?? 0);
}

/** Transactions with an id in this database, other than this session's (which has none: it only reads). */
async function runningTransactions(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ xid: string }>(
    `SELECT backend_xid::text AS xid FROM pg_stat_activity WHERE datname = current_database() AND backend_xid IS NOT NULL`,
  );
  return rows.map((row) => row.xid);
}

async function stillRunning(pool: pg.Pool, xids: readonly string[]): Promise<string[]> {
  const { rows } = await pool.query<{ xid: string }>(
    `SELECT backend_xid::text AS xid FROM pg_stat_activity WHERE datname = current_database() AND backend_xid::text = ANY($1::text[])`,
    [xids],
  );
  return rows.map((row) => row.xid);
}
