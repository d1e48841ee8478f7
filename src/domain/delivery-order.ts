import { storedId } from './normalize.js';

/**
 * Ordered delivery's pure rules: which queue (scope) a delivery's key is
 * ordered in, and how one store transaction's new deliveries of a key chain
 * behind each other. The stores do the I/O (see docs/architecture.md,
 * "Ordered delivery").
 */

/** The scope of a source's Webhooks destination: its keys' order is kept across all its deliveries. */
export function destinationScope(sourceId: string): string {
  return `webhooks:${sourceId}`;
}

/** A replay keeps its own order per key, apart from live deliveries. */
export function replayScope(replayId: string): string {
  return `replay:${replayId}`;
}

/** The scope a delivery is ordered in: its replay's, else its source's Webhooks destination's. */
export function deliveryScope(sourceId: string, replayId: string | undefined): string {
  return replayId === undefined ? destinationScope(sourceId) : replayScope(replayId);
}

/**
 * The key of a stored message body: its userId, else its anonymousId;
 * undefined when it has neither. Named as ingest stores ids (storedId): a
 * body stored before ingest replaced U+0000 may still hold one, which a
 * PostgreSQL key column (delivery_tails) refuses on every try.
 */
export function orderKeyOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const record = body as Record<string, unknown>;
  for (const field of ['userId', 'anonymousId']) {
    const value = record[field];
    if (typeof value === 'string' && value !== '') return storedId(value);
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  }
  return undefined;
}

export interface OrderedJob {
  /** The new delivery's id. */
  readonly id: number;
  readonly scope: string;
  readonly key: string;
  /** When it falls due if nothing is before it. */
  readonly at: number;
}

/** Where a delivery stands in its key's order: its scope and key. */
export interface OrderPlace {
  readonly scope: string;
  readonly key: string;
}

/** Orders (scope, key) pairs by code unit: every transaction that locks several keys' tails locks them in this order. */
export function compareScopeKey(x: OrderPlace, y: OrderPlace): number {
  return x.scope < y.scope ? -1 : x.scope > y.scope ? 1 : x.key < y.key ? -1 : x.key > y.key ? 1 : 0;
}

export interface ChainedJob extends OrderedJob {
  /** The delivery before it in the same transaction, when there is one. */
  readonly before: number | undefined;
}

/**
 * Chains new deliveries (in creation order) of one scope and key behind each
 * other, and names each (scope, key)'s first and last: the first links to
 * the key's tail in the store, the last becomes the new tail.
 */
export function chainJobs(jobs: readonly OrderedJob[]): { chained: ChainedJob[]; heads: Map<string, { first: OrderedJob; last: OrderedJob }> } {
  const heads = new Map<string, { first: OrderedJob; last: OrderedJob }>();
  const chained: ChainedJob[] = [];
  for (const job of jobs) {
    const name = `${job.scope}\u0000${job.key}`;
    const head = heads.get(name);
    if (head === undefined) {
      heads.set(name, { first: job, last: job });
      chained.push({ ...job, before: undefined });
    } else {
      chained.push({ ...job, before: head.last.id });
      head.last = job;
    }
  }
  return { chained, heads };
}
