/** Records of transformations and of the deliveries waiting for one (see `TransformationStore` in store.ts). */
import type { OrderPlace } from '../domain/delivery-order.js';

export interface TransformationRecord {
  readonly id: string;
  readonly name: string;
  /** The latest version (1, 2, …). */
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface TransformationVersionRecord {
  readonly id: string;
  /** The transformation's name now. */
  readonly name: string;
  readonly version: number;
  readonly code: string;
  /** When this version was saved. */
  readonly createdAt: number;
}

/** A delivery created `transforming`, with its message (oldest first). */
export interface TransformingDelivery {
  readonly id: number;
  readonly sourceId: string;
  readonly messageSeq: number;
  readonly messageId: string | undefined;
  /** The message's stored body (null once the message is gone). */
  readonly body: string | null;
  /** Queued by a replay: its outcome never changes the message's status. */
  readonly replay: boolean;
  /** The replay that queued it (its deliveries are ordered in the replay's scope). */
  readonly replayId?: string | undefined;
  /** The message's stored `traceparent` (see IngestEntry.traceparent). */
  readonly traceparent?: string | undefined;
}

/** What the debugger shows of a transformation run on a message. */
export interface TransformInfo {
  readonly id: string;
  readonly name: string;
  readonly version: number;
  readonly logs: readonly string[];
}

/**
 * What the transform stage stores for one delivery, in one commit with the
 * others of its pass. Applies only while the delivery is still
 * `transforming` (another node may have stored it first).
 */
export type TransformResult = {
  readonly deliveryId: number;
  readonly messageSeq: number;
  readonly at: number;
  /** A replay's delivery: the message's status and debugger entry stay as they are. */
  readonly replay: boolean;
  /** Undefined when no transformation ran (it was detached since: the delivery goes on with the message's body). */
  readonly info: TransformInfo | undefined;
  /**
   * The (scope, key) the delivery is ordered in, when its message has a key;
   * given for a drop, a failure and a split: the store may have to pass the
   * delivery's place in the key's order on, or check whether the key's tail
   * names it.
   */
  readonly order?: OrderPlace | undefined;
} & (
  | { readonly kind: 'output'; readonly bodies: readonly string[] }
  | { readonly kind: 'unchanged' }
  | { readonly kind: 'dropped'; readonly reason: string }
  | { readonly kind: 'failed'; readonly reason: string }
);

export interface TransformationStore {
  /** Stores a new transformation as version 1. */
  insertTransformation(id: string, name: string, code: string, at: number): Promise<TransformationVersionRecord>;
  /** Stores the next version (and the name, when given); undefined when there is no such transformation. */
  addTransformationVersion(id: string, code: string, name: string | undefined, at: number): Promise<TransformationVersionRecord | undefined>;
  listTransformations(): Promise<TransformationRecord[]>;
  getTransformation(id: string): Promise<TransformationRecord | undefined>;
  /** One version (`undefined` version: the latest). */
  getTransformationVersion(id: string, version?: number): Promise<TransformationVersionRecord | undefined>;
  listTransformationVersions(id: string): Promise<Array<{ version: number; createdAt: number }>>;
  /** Deletes it with its versions; resolves false when absent. */
  deleteTransformation(id: string): Promise<boolean>;
  /** Up to `limit` deliveries waiting for their transformation, oldest first, but those of `skipSourceIds`. */
  listTransformingDeliveries(limit: number, skipSourceIds: readonly string[]): Promise<TransformingDelivery[]>;
  /**
   * In one commit, for each result whose delivery is still `transforming`
   * (in the order given: a key's earlier delivery first):
   * `output`: the delivery becomes `pending` with the body; due at `at`
   * unless it is ordered behind a delivery still `pending` or
   * `transforming` (then that one's final outcome releases it). A split
   * (several bodies): each body is a delivery of the same message and
   * destination, in order; on an ordered delivery (linked to a key's chain)
   * new deliveries carry all bodies but the last, chained behind each other
   * from the delivery's predecessor, and the delivery itself carries the
   * last one behind them, so what waits for it waits for every part.
   * Unordered, the delivery carries the first body and the new ones are due
   * at once. `unchanged`: as `output` with no body of its own. `dropped`:
   * the delivery is deleted, its successors and its key's tail take its
   * predecessor instead (released when that one is final or absent), the
   * message `filtered` with the reason. `failed`: the delivery is `failed`
   * (transform_failed, so a requeue makes it `transforming` again) and, never
   * sent, passes its place on as a drop does (it may fail before its
   * predecessor ends: released at once, its successor would overtake that
   * one), the message `failed` with the reason. Every result with `info` records it on the message.
   * Notifies `deliveries` and `messages`.
   */
  finishTransforms(results: readonly TransformResult[]): Promise<void>;
}
