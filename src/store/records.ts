import type { MessageStatus } from '../domain/message.js';
import type { MessageShape } from '../domain/observed-schema.js';
import type { Violation } from '../domain/tracking-plan-check.js';
import type { RegulationStatus, RegulationStepStatus, RegulationType } from '../domain/regulation.js';
import type { DeliveryTarget, DestinationKind } from '../domain/routing.js';

/**
 * The records the `Store` contract takes and gives, but those of
 * Engage (`engage-records.ts`): sources, destinations, messages, deliveries,
 * regulations, replays. Plain data; what each field means to the store is in
 * the contract's TSDoc (`store.ts`).
 */
export interface SourceRecord {
  readonly id: string;
  readonly name: string;
  readonly writeKey: string;
  readonly enabled: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface SourcePatch {
  readonly name?: string;
  readonly enabled?: boolean;
}

export interface DestinationRecord {
  readonly sourceId: string;
  readonly kind: DestinationKind;
  readonly enabled: boolean;
  /** Destination-specific settings, validated by the caller. */
  readonly settings: unknown;
  readonly updatedAt: number;
}

export interface IngestEntry {
  readonly sourceId: string;
  readonly status: Exclude<MessageStatus, 'duplicate'>;
  readonly reason?: string | undefined;
  /** The call type; for a rejected entry, whatever type the client gave (if any). */
  readonly type: string | undefined;
  readonly messageId: string | undefined;
  readonly userId: string | undefined;
  readonly receivedAt: number;
  /** The message as JSON text, exactly as it will be delivered. */
  readonly body: string;
  /** Destinations to create delivery jobs for, when the entry is stored as accepted. */
  readonly destinations: readonly DeliveryTarget[];
  /** The Webhooks delivery is created `transforming`: the source's destination has a transformation. */
  readonly transforming?: boolean | undefined;
  /**
   * Set when its Webhooks delivery is ordered (`settings.ordering: "user"`):
   * the userId, else the anonymousId. The store links the delivery behind the
   * key's previous one (see docs/architecture.md, "Ordered delivery").
   */
  readonly orderKey?: string | undefined;
  /** An Engage sync: the computation and receiver key it is chained on (see EngageStore.commitEngage). */
  readonly engageSync?: EngageSyncKey | undefined;
  /** The message's shape as received, for the source's observed schema (set by processing; see src/domain/observed-schema.ts). */
  readonly shape?: MessageShape | undefined;
  /** What the source's tracking plan found (the first 20), counted for the violation counts. */
  readonly violations?: readonly Violation[] | undefined;
  /**
   * The W3C `traceparent` of the span that processed it (tracing on only),
   * stored with the message so that its deliveries' spans join the trace.
   */
  readonly traceparent?: string | undefined;
}

/**
 * What an Engage sync's delivery is chained on: one computation, one
 * receiver key (`u:<userId>` or `a:<anonymousId>`), one source (the entry's).
 */
export interface EngageSyncKey {
  readonly computationId: string;
  readonly key: string;
}

/**
 * One Tracking API request as ingest stored it before its 200: the body
 * text as received (after decompression), with what the request said
 * besides the body. The processing stage turns it into messages later.
 */
export interface NewRawRequest {
  readonly sourceId: string;
  /** The call type of the path, or `batch`. */
  readonly route: string;
  readonly receivedAt: number;
  readonly ip: string | undefined;
  /**
   * The config version ingest had loaded when it took the request: the
   * processing stage routes it with a config at least this new, so a
   * destination or suppression answered before the request applies to it.
   */
  readonly configVersion: number;
  /** Messages in it (1 for a call, the batch's length), for the backlog bound. */
  readonly messageCount: number;
  /** Header defaults (`AnonymousId`, `SentAt`) as JSON, or undefined when none was sent. */
  readonly headers: string | undefined;
  readonly body: string;
}

export interface RawRequest extends NewRawRequest {
  readonly seq: number;
}

/** What a processing call did: raw requests processed, and the results of the messages stored for them. */
export interface RawProcessed {
  readonly requests: number;
  readonly results: readonly AppendResult[];
  /**
   * True when the batch took every raw request there was (on a store shared
   * by nodes, every one no other node was processing), so the processor
   * need not look again until notified (`raw`).
   */
  readonly caughtUp: boolean;
}

/** How a processing transaction runs (see IngestStore.processRawRequests). */
export interface ProcessingOptions {
  /**
   * Whether its entries may link ordered deliveries (`orderKey`): on a
   * multi-node store such a transaction first takes the lock that makes
   * processing one node at a time, so that a key's deliveries chain in the
   * order of the requests. Without ordered destinations nodes process side
   * by side. Default true. A transaction begun without the lock whose
   * entries turn out to need it (the config changed meanwhile) rolls back
   * with ProcessingLockNeeded, and the caller tries again with it.
   */
  readonly ordered?: boolean;
}

/** The raw requests not processed yet. */
export interface RawBacklog {
  readonly requests: number;
  readonly messages: number;
  /** receivedAt of the oldest, or undefined when there is none. */
  readonly oldestReceivedAt: number | undefined;
}

export interface AppendResult {
  readonly seq: number;
  readonly status: MessageStatus;
}

export interface StoredMessage {
  readonly seq: number;
  readonly sourceId: string;
  readonly status: MessageStatus;
  readonly reason: string | undefined;
  readonly type: string | undefined;
  readonly messageId: string | undefined;
  readonly userId: string | undefined;
  readonly receivedAt: number;
  readonly body: string;
  /** JSON of the `TransformInfo` of the transformation that ran on it, if one did. */
  readonly transform?: string | undefined;
}

/** `transforming`: waiting for its transformation (not claimable yet). */
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'transforming';

export interface ClaimRequest {
  readonly owner: string;
  readonly limit: number;
  readonly leaseMs: number;
  readonly now: number;
}

export interface ClaimedDelivery {
  readonly id: number;
  readonly sourceId: string;
  readonly destination: DeliveryTarget;
  readonly messageSeq: number;
  /** The stored message JSON, or the transformation's output (see `transformed`). */
  readonly body: string;
  /**
   * The body is a transformation's output, the delivery's own: sent as the
   * transformation returned it, not as a stored message's webhook payload.
   */
  readonly transformed?: true | undefined;
  readonly attemptCount: number;
  /** When the first attempt was made, which starts the retry window; undefined before it. */
  readonly firstAttemptAt: number | undefined;
  /** Receivers left to retry after earlier attempts; undefined means every receiver. */
  readonly retryUrls: readonly string[] | undefined;
  readonly createdAt: number;
  /** Set when the delivery re-sends a message for a replay. */
  readonly replayId?: string | undefined;
  /** The message's stored `traceparent` (see IngestEntry.traceparent); undefined when none was stored. */
  readonly traceparent?: string | undefined;
  /**
   * Set when the delivery must not be sent any more, and why (its Engage
   * computation was deleted while it waited in an ordered key's chain): the
   * round ends it failed with this reason, without sending.
   */
  readonly cancelled?: string | undefined;
}

export interface AttemptRecord {
  readonly at: number;
  readonly url: string;
  readonly statusCode?: number | undefined;
  readonly error?: string | undefined;
  readonly durationMs: number;
  /** What the receiver answered, when it answered: bounded by the sender (see webhook-sender.ts). */
  readonly response?: AttemptResponse | undefined;
  /** A function destination's call: its outcome, fetches and logs (bounded by the function runner). */
  readonly functionRun?: FunctionRunRecord | undefined;
}

/** What one call of a function destination did, as its attempt records it. */
export interface FunctionRunRecord {
  readonly version: number;
  /** `delivered`, `retry` or `failed`. */
  readonly outcome: 'delivered' | 'retry' | 'failed';
  /** The error class thrown (RetryError, EventNotSupported, …), when one was. */
  readonly errorType?: string | undefined;
  readonly fetches: readonly FetchRecord[];
  readonly logs: readonly string[];
}

/** One `fetch` a function made. */
export interface FetchRecord {
  readonly method: string;
  readonly url: string;
  readonly status?: number | undefined;
  readonly error?: string | undefined;
  readonly durationMs: number;
}

/** The part of a receiver's answer the attempt log keeps. */
export interface AttemptResponse {
  readonly contentType?: string | undefined;
  readonly retryAfter?: string | undefined;
  /** The first RESPONSE_BODY_KEPT bytes of the body, as UTF-8. */
  readonly body: string;
  /** Set when the body was longer than what is kept. */
  readonly bodyTruncated?: true | undefined;
}

/**
 * - succeeded / failed: final (failed can be requeued by hand).
 * - retry: pending again, due at `nextAttemptAt`, only for `retryUrls`.
 * - deferred: nothing was sent (e.g. a circuit breaker held it); pending again
 *   at `nextAttemptAt`, counting no attempt.
 */
export type DeliveryOutcome =
  | {
      readonly kind: 'succeeded' | 'failed';
      readonly id: number;
      readonly owner: string;
      readonly at: number;
      readonly firstAttemptAt: number;
      readonly attempts: readonly AttemptRecord[];
      readonly lastError?: string | undefined;
    }
  | {
      readonly kind: 'retry';
      readonly id: number;
      readonly owner: string;
      readonly at: number;
      readonly firstAttemptAt: number;
      readonly attempts: readonly AttemptRecord[];
      readonly nextAttemptAt: number;
      readonly retryUrls: readonly string[];
      readonly lastError?: string | undefined;
    }
  | {
      readonly kind: 'deferred';
      readonly id: number;
      readonly owner: string;
      readonly at: number;
      readonly nextAttemptAt: number;
    };

export interface DeliveryFilter {
  readonly sourceId?: string | undefined;
  readonly status?: DeliveryStatus | undefined;
  readonly limit: number;
  /** Only deliveries with an id below this one (pagination, newest first). */
  readonly beforeId?: number | undefined;
  /** Only deliveries of messages with this userId (exact). */
  readonly userId?: string | undefined;
  /** Only deliveries of messages with this messageId (exact). */
  readonly messageId?: string | undefined;
}

export interface RequeueFilter {
  readonly id?: number | undefined;
  readonly sourceId?: string | undefined;
  /** Only deliveries that failed at or after this time. */
  readonly since?: number | undefined;
}

export interface DeliveryRecord {
  readonly id: number;
  readonly sourceId: string;
  readonly destination: DeliveryTarget;
  readonly messageSeq: number;
  readonly messageId: string | undefined;
  readonly status: DeliveryStatus;
  readonly attemptCount: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly nextAttemptAt: number | undefined;
  readonly firstAttemptAt: number | undefined;
  readonly lastError: string | undefined;
  /** Set when the delivery re-sends a message for a replay. */
  readonly replayId?: string | undefined;
  /** Pending behind this delivery of the same key (ordered delivery, replays): not sent before it ends. */
  readonly waitingFor?: number | undefined;
  /** The message's stored JSON text; undefined once the message is gone (retention, a deletion request). */
  readonly messageBody?: string | undefined;
}

export interface DeliveryDetail extends DeliveryRecord {
  readonly attempts: readonly AttemptRecord[];
}

export interface NewRegulation {
  /** Unique; chosen by the caller. */
  readonly id: string;
  readonly regulationType: RegulationType;
  /** User ids, non-empty and without repeats. */
  readonly subjectIds: readonly string[];
  /** The sources the request names; undefined means every source, including sources created later. */
  readonly sourceIds: readonly string[] | undefined;
  /** The affected sources, one row each: `sourceIds`, or every source that exists at creation. */
  readonly stepSourceIds: readonly string[];
  readonly createdAt: number;
}

export interface RegulationFilter {
  readonly status?: RegulationStatus | undefined;
  readonly limit: number;
  /** How many source rows each request carries (its first by source id); `sourceCounts` counts them all. */
  readonly sources: number;
}

/** Which of a request's source rows to read: those after `after` (by source id), at most `limit`. */
export interface RegulationSourcePage {
  readonly after?: string | undefined;
  readonly limit: number;
}

/** A request's source rows counted by status (finished: the rest). */
export interface RegulationSourceCounts {
  readonly total: number;
  readonly pending: number;
  readonly failed: number;
}

export interface RegulationSourceRecord {
  readonly sourceId: string;
  readonly status: RegulationStepStatus;
  /** Why the step failed; only for `FAILED`. */
  readonly error: string | undefined;
  readonly updatedAt: number;
}

export interface RegulationRecord {
  readonly id: string;
  readonly regulationType: RegulationType;
  readonly subjectCount: number;
  readonly sourceIds: readonly string[] | undefined;
  readonly status: RegulationStatus;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** One per affected source, ordered by source id; lists and pages carry some of them (see `sourceCounts`). */
  readonly sources: readonly RegulationSourceRecord[];
  /** All its source rows, counted: kept on the request's row as the steps end, so a list need not read them. */
  readonly sourceCounts: RegulationSourceCounts;
}

export interface RegulationDetail extends RegulationRecord {
  readonly subjectIds: readonly string[];
  /**
   * The highest raw request seq when the request was stored (see
   * Store.highestRawSeq): its deletion steps run once no raw request up to
   * it is left unprocessed. Requests stored before this mark existed have
   * the highest seq of the moment the store was upgraded.
   */
  readonly rawSeqMark: number;
}

export interface RegulationStepKey {
  readonly regulationId: string;
  readonly sourceId: string;
}

export interface RegulationStepRun extends RegulationStepKey {
  /** Users whose stored messages on the source are erased. */
  readonly eraseUserIds: readonly string[];
  /** Messages to store in the same commit (the `delete` messages), each with `sourceId` = the step's source. */
  readonly messages: readonly IngestEntry[];
  readonly at: number;
}

export interface SuppressionRecord {
  readonly userId: string;
  /** Undefined: the user is suppressed on every source. */
  readonly sourceId: string | undefined;
  /** The request that started (or last renewed) it. */
  readonly regulationId: string;
  readonly createdAt: number;
}

/** A suppression row as it last changed: in force, or lifted since (then `regulationId` is the request that lifted it). */
export interface SuppressionChange extends SuppressionRecord {
  /** Higher for every change than for any change committed before it, from any node. */
  readonly seq: number;
  readonly lifted: boolean;
}

export type ReplayStatus = 'running' | 'done' | 'cancelled';

export interface NewReplay {
  readonly id: string;
  readonly sourceId: string;
  /** Messages with `from <= receivedAt < to`. */
  readonly from: number;
  readonly to: number;
  /** Receiver URLs to send to; undefined means every receiver. */
  readonly receivers: readonly string[] | undefined;
  readonly types: readonly string[] | undefined;
  readonly events: readonly string[] | undefined;
  readonly createdAt: number;
}

/** How many replays may be running at once, on one source and in all (across nodes: the store counts). */
export interface ReplayLimits {
  readonly perSource: number;
  readonly total: number;
}

/** Why a store refused a new replay: the source, or the store, already has as many running as its limit. */
export type ReplayRefusal = 'source_limit' | 'total_limit';

/** The lowest and highest seq of a source's messages received in a replay's range. */
export interface ReplayRange {
  readonly first: number;
  readonly last: number;
}

export interface ReplayRecord extends NewReplay {
  readonly status: ReplayStatus;
  /** The seq of the last message the replay has looked at. */
  readonly cursor: number;
  /** Messages queued. */
  readonly queued: number;
  /** Of those, deliveries that succeeded, and that failed. */
  readonly delivered: number;
  readonly failed: number;
  readonly updatedAt: number;
}

export interface ReplayPage {
  readonly replayId: string;
  readonly sourceId: string;
  readonly fromCursor: number;
  readonly toCursor: number;
  readonly messageSeqs: readonly number[];
  /**
   * Each message's ordering key (userId, else anonymousId), by position: a
   * replay keeps each key's order whatever the destination's ordering says.
   * Absent (or an undefined key): not ordered.
   */
  readonly orderKeys?: ReadonlyArray<string | undefined> | undefined;
  readonly receivers: readonly string[] | undefined;
  readonly at: number;
  /** The destination has a transformation: the deliveries are created `transforming` (it runs again on each). */
  readonly transforming?: boolean | undefined;
  /**
   * Where the page's deliveries go (default: the Webhooks destination): one
   * delivery per message and destination. `receivers`, `orderKeys` and
   * `transforming` are the Webhooks destination's; a function destination's
   * replayed deliveries are due at once, unordered.
   */
  readonly destinations?: readonly DeliveryTarget[] | undefined;
}
