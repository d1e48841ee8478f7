/**
 * Bytes of Tracking API request bodies being read, in all and per client
 * address.
 *
 * Why: a body is read before its write key is known (the key may be inside
 * it), so reading costs anyone memory without a credential. Each body is
 * bounded (32 KB for a call, 500 KB for a batch), and so is its time (the
 * request timeout), but the number of bodies read at once was not: a client
 * holding 600 connections, each with 490 KB of a 500 KB batch sent and the
 * rest withheld, took the process from 205 to 450 MB, and more connections
 * would run it out of memory. The commit backlog's bound (serve.ts) counts
 * only requests already read.
 *
 * So a body reserves what it holds as it grows (see `readBody`: what the
 * client sent, at most twice that), and a request that would go over
 * either bound is refused with 503 `overloaded` at once, reading nothing
 * more of it. Taking the budget thus costs sending it. The share per
 * address keeps one client from taking the whole budget from the rest; a
 * client that sends its bodies at network speed holds few at once.
 */
export class BodyBudget {
  private used = 0;
  private readonly byClient = new Map<string, number>();

  constructor(
    /** Bytes of bodies being read at once, from all clients. */
    readonly totalBytes: number,
    /** Bytes of bodies being read at once from one client address. */
    readonly perClientBytes: number,
  ) {}

  /** Bytes reserved now, in all. */
  get reserved(): number {
    return this.used;
  }

  /** A reservation for one request's body, empty until it grows; release it once the request is answered. `client`: see `shareKey`. */
  open(client: string): BodyReservation {
    return new BodyReservation(this, client);
  }

  /** Takes `bytes` for `client` if both bounds allow it; otherwise says which bound refused, taking nothing. */
  take(client: string, bytes: number): 'ok' | 'client' | 'total' {
    const mine = this.byClient.get(client) ?? 0;
    if (mine + bytes > this.perClientBytes) return 'client';
    if (this.used + bytes > this.totalBytes) return 'total';
    this.used += bytes;
    this.byClient.set(client, mine + bytes);
    return 'ok';
  }

  give(client: string, bytes: number): void {
    if (bytes === 0) return;
    this.used -= bytes;
    const left = (this.byClient.get(client) ?? 0) - bytes;
    // No entry per address once it holds nothing: the map is as large as the clients reading now.
    if (left <= 0) this.byClient.delete(client);
    else this.byClient.set(client, left);
  }
}

/** What one request's body holds of a {@link BodyBudget}. */
export class BodyReservation {
  private held = 0;
  private released = false;

  constructor(
    private readonly budget: BodyBudget,
    private readonly client: string,
  ) {}

  /** Bytes held now. */
  get bytes(): number {
    return this.held;
  }

  /**
   * Grows the reservation to at least `total` bytes; false when the budget
   * refuses (the reservation stays as it was), and after release.
   */
  growTo(total: number): boolean {
    if (this.released) return false;
    if (total <= this.held) return true;
    const refused = this.budget.take(this.client, total - this.held);
    if (refused !== 'ok') {
      this.refusedBy = refused;
      return false;
    }
    this.held = total;
    return true;
  }

  /** Which bound refused the last growth that failed. */
  refusedBy: 'client' | 'total' | undefined;

  /** Gives everything back; later growth is refused. Safe to call more than once. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.client, this.held);
    this.held = 0;
  }
}
