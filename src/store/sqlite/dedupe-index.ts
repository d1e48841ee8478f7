import { randomInt } from 'node:crypto';

/**
 * Where the SQLite store looks up whether a source accepted a messageId
 * within the de-duplication window.
 *
 * It lives in memory, not in a table: a persisted index keyed by random ids
 * dirties one page per message and was three quarters of the cost of storing
 * one (measured: 27 µs per message with it, 6 µs without). The messages
 * table already records every accepted message, so the index is derived data
 * and {@link MessageQueries} rebuilds it from there before the first append.
 *
 * Each entry is a 32-bit hash of (source, messageId) and the seq of the
 * accepted message; a hash match is only a candidate, which the caller
 * confirms against the stored row. So a hash collision costs one row read,
 * never a wrongly dropped message, and a row that is gone (erased by a
 * deletion request, or rolled back with its commit) stops counting by itself.
 *
 * Entries are kept in one table per hour of receivedAt, and an hour is
 * dropped whole once it is older than the window. Memory is 17–34 bytes
 * (12 a slot, tables 35–70% full) per message accepted in the last 24
 * hours; past {@link MAX_KEYS} the oldest hour goes early, shortening the
 * window rather than exhausting memory.
 */
export class DedupeIndex {
  private readonly hours = new Map<number, KeyTable>();
  private keys = 0;
  /** Per process, so nobody can pick message ids that all land in one slot. */
  private readonly seed = randomInt(2 ** 31);

  constructor(private readonly maxKeys = MAX_KEYS) {}

  /**
   * Whether an entry for this pair may be a sighting since `since`: calls
   * `sameMessage` with each candidate's seq until one is confirmed.
   */
  seen(sourceId: string, messageId: string, since: number, sameMessage: (seq: number) => boolean): boolean {
    this.forget(since);
    const hash = hashPair(sourceId, messageId, this.seed);
    for (const table of this.hours.values()) {
      if (table.find(hash, sameMessage)) return true;
    }
    return false;
  }

  add(sourceId: string, messageId: string, receivedAt: number, seq: number): void {
    const hour = Math.floor(receivedAt / HOUR_MS);
    let table = this.hours.get(hour);
    if (table === undefined) this.hours.set(hour, (table = new KeyTable()));
    table.add(hashPair(sourceId, messageId, this.seed), seq);
    this.keys++;
    while (this.keys > this.maxKeys && this.hours.size > 1) this.dropOldest();
  }

  /** Entries held, across every hour. */
  get size(): number {
    return this.keys;
  }

  /** Drops the hours that end before `since`. */
  private forget(since: number): void {
    for (const [hour, table] of this.hours) {
      if ((hour + 1) * HOUR_MS <= since) {
        this.hours.delete(hour);
        this.keys -= table.size;
      }
    }
  }

  private dropOldest(): void {
    const oldest = Math.min(...this.hours.keys());
    this.keys -= this.hours.get(oldest)!.size;
    this.hours.delete(oldest);
  }
}

const HOUR_MS = 3_600_000;

/** 170–340 MB: a day at a steady 115 messages/s. Busier sources belong on PostgreSQL. */
export const MAX_KEYS = 10_000_000;

const INITIAL_SLOTS = 1024;

/** Open addressing with linear probing; hash 0 marks an empty slot. */
class KeyTable {
  private hashes = new Uint32Array(INITIAL_SLOTS);
  private seqs = new Float64Array(INITIAL_SLOTS);
  private count = 0;

  get size(): number {
    return this.count;
  }

  find(hash: number, sameMessage: (seq: number) => boolean): boolean {
    const mask = this.hashes.length - 1;
    for (let slot = hash & mask; this.hashes[slot] !== 0; slot = (slot + 1) & mask) {
      if (this.hashes[slot] === hash && sameMessage(this.seqs[slot]!)) return true;
    }
    return false;
  }

  add(hash: number, seq: number): void {
    // Grow at 70% full: linear probing degrades fast beyond that.
    if ((this.count + 1) * 10 > this.hashes.length * 7) this.grow();
    this.place(hash, seq);
    this.count++;
  }

  private place(hash: number, seq: number): void {
    const mask = this.hashes.length - 1;
    let slot = hash & mask;
    while (this.hashes[slot] !== 0) slot = (slot + 1) & mask;
    this.hashes[slot] = hash;
    this.seqs[slot] = seq;
  }

  private grow(): void {
    const { hashes, seqs } = this;
    this.hashes = new Uint32Array(hashes.length * 2);
    this.seqs = new Float64Array(seqs.length * 2);
    for (let slot = 0; slot < hashes.length; slot++) {
      if (hashes[slot] !== 0) this.place(hashes[slot]!, seqs[slot]!);
    }
  }
}

/**
 * A seeded 32-bit hash of the pair (two multiply-xorshift lanes folded into
 * one), never 0. Not cryptographic: collisions only cost a confirming read.
 */
export function hashPair(sourceId: string, messageId: string, seed: number): number {
  let a = 0x9e3779b9 ^ seed;
  let b = 0x85ebca6b ^ seed;
  for (let i = 0; i < sourceId.length; i++) {
    const code = sourceId.charCodeAt(i);
    a = Math.imul(a ^ code, 0x2c1b3c6d);
    b = Math.imul(b ^ code, 0x297a2d39);
  }
  // The separator keeps ("ab", "c") and ("a", "bc") apart.
  a = Math.imul(a ^ 0xffff_ffff, 0x2c1b3c6d);
  for (let i = 0; i < messageId.length; i++) {
    const code = messageId.charCodeAt(i);
    a = Math.imul(a ^ code, 0x2c1b3c6d);
    b = Math.imul(b ^ code, 0x297a2d39);
  }
  a = Math.imul(a ^ (a >>> 16), 0x85ebca6b) ^ Math.imul(b ^ (b >>> 13), 0xc2b2ae35);
  a ^= a >>> 16;
  return a >>> 0 || 1;
}
