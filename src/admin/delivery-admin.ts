import { ApiError } from '../errors.js';
import type { AttemptRecord, AttemptResponse, DeliveryDetail, DeliveryRecord, DeliveryStatus, FunctionRunRecord, Store } from '../store/store.js';
import { MAX_ID_BYTES, idWithinBounds, storedId } from '../domain/normalize.js';
import { type HeldCircuit, receiverOrigin } from '../domain/circuits.js';
import { functionIdOf } from '../domain/routing.js';
import { limitParam, refuseNul, rejectUnknownFields, requireObject, timeParam } from './validate.js';

/** A delivery as the admin API and the CLI show it; times are ISO-8601. */
export interface DeliveryView {
  readonly id: number;
  readonly sourceId: string;
  /** `webhooks`, or `function` (with `functionId`). */
  readonly destination: string;
  readonly functionId?: string;
  readonly messageSeq: number;
  readonly messageId?: string;
  /** The message's call type, event (a track's) and user, while the message is stored. */
  readonly type?: string;
  readonly event?: string;
  readonly userId?: string;
  readonly anonymousId?: string;
  readonly status: DeliveryStatus;
  readonly attemptCount: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** For a pending delivery: when it is next tried (while a worker holds it, when its lease ends). */
  readonly nextAttemptAt?: string;
  readonly firstAttemptAt?: string;
  readonly lastError?: string;
  /** The replay the delivery re-sends a message for. */
  readonly replayId?: string;
  /** Pending behind this earlier delivery of the same user: sent once that one has its final outcome. */
  readonly waitingFor?: number;
}

/**
 * A circuit breaker holding a pending delivery's receiver (by origin) or
 * function destination: this node's breaker, as it is now (each node has
 * its own). While `open`, deliveries to it go back to the queue with no
 * attempt recorded; after `until` the next one is sent as a probe
 * (`half-open` while it runs); its success closes the circuit.
 */
export interface HeldByView {
  readonly reason: 'circuit-open';
  /** The receiver's origin (`https://host:port`) or `function:<id>`. */
  readonly target: string;
  readonly state: 'open' | 'half-open';
  readonly until?: string;
}

/** Where `GET /deliveries/:id` learns what holds a pending delivery (the server's; the CLI on a store has none). */
export interface DeliveryHolds {
  /** This node's held circuits; undefined when it cannot say. */
  circuits(): Promise<readonly HeldCircuit[] | undefined>;
  /** The receiver URLs of the source's Webhooks destination now. */
  receivers(sourceId: string): readonly string[];
}

export interface AttemptView {
  readonly at: string;
  readonly url: string;
  readonly statusCode?: number;
  readonly error?: string;
  readonly durationMs: number;
  readonly response?: AttemptResponse;
  /** A function destination's call: version, outcome, errorType?, fetches, logs. */
  readonly function?: FunctionRunRecord;
}

export interface DeliveryDetailView extends DeliveryView {
  /** The message as stored (before any transformation), parsed; absent once it is gone. */
  readonly message?: unknown;
  /** A pending delivery's targets whose circuit this node holds open (see {@link HeldByView}); absent when none is, or nothing is known. */
  readonly heldBy?: readonly HeldByView[];
  readonly attempts: readonly AttemptView[];
}

const STATUSES: readonly DeliveryStatus[] = ['pending', 'succeeded', 'failed'];
const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1_000;

/** Reading the delivery queue and requeueing failed deliveries; shared by the admin routes and the CLI. */
export class DeliveryAdmin {
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    private readonly holds?: DeliveryHolds,
  ) {}

  /**
   * Newest first; `beforeId` pages on from the last id of the previous page.
   * `userId` and `messageId` keep the deliveries of the messages with exactly
   * that id.
   */
  async list(query: {
    sourceId?: unknown;
    status?: unknown;
    limit?: unknown;
    beforeId?: unknown;
    userId?: unknown;
    messageId?: unknown;
  }): Promise<{ deliveries: DeliveryView[] }> {
    const status = query.status === undefined || query.status === '' ? undefined : query.status;
    if (status !== undefined && !STATUSES.includes(status as DeliveryStatus)) {
      throw new ApiError('invalid_request', `status must be one of ${STATUSES.join(', ')}`);
    }
    const records = await this.store.listDeliveries({
      sourceId: optionalString(query.sourceId, 'sourceId'),
      status: status as DeliveryStatus | undefined,
      limit: limitParam(query.limit, DEFAULT_LIMIT, MAX_LIMIT),
      beforeId: query.beforeId === undefined || query.beforeId === '' ? undefined : deliveryId(query.beforeId, 'beforeId'),
      userId: messageField(query.userId, 'userId'),
      messageId: messageField(query.messageId, 'messageId'),
    });
    return { deliveries: records.map((record) => viewDelivery(record, parseBody(record.messageBody))) };
  }

  async get(id: unknown): Promise<DeliveryDetailView> {
    const detail = await this.store.getDelivery(deliveryId(id));
    if (detail === undefined) throw notFound(id);
    const view = viewDetail(detail);
    const heldBy = detail.status === 'pending' ? await this.heldBy(detail) : [];
    return heldBy.length === 0 ? view : { ...view, heldBy };
  }

  /** The circuits of this node's breaker that hold the delivery's targets: its function destination, or its destination's receivers by origin. */
  private async heldBy(delivery: DeliveryRecord): Promise<HeldByView[]> {
    if (this.holds === undefined) return [];
    const functionId = functionIdOf(delivery.destination);
    const targets = new Set<string>();
    if (functionId !== undefined) targets.add(delivery.destination);
    else for (const url of this.holds.receivers(delivery.sourceId)) targets.add(receiverOrigin(url) ?? url);
    if (targets.size === 0) return [];
    const circuits = (await this.holds.circuits()) ?? [];
    return circuits
      .filter((circuit) => targets.has(circuit.target))
      .map((circuit) => ({ reason: 'circuit-open', target: circuit.target, state: circuit.state, ...(circuit.until !== undefined && { until: iso(circuit.until) }) }));
  }

  /**
   * Puts one failed delivery back in the queue, with a fresh retry window; a
   * pending one waiting for its next attempt becomes due at once (its retry
   * window unchanged). One being sent right now answers `{requeued: 0}`.
   */
  async retry(id: unknown): Promise<{ requeued: number }> {
    const numeric = deliveryId(id);
    const requeued = await this.store.requeueFailedDeliveries({ id: numeric }, this.now());
    if (requeued > 0) return { requeued };
    const delivery = await this.store.getDelivery(numeric);
    if (delivery === undefined) throw notFound(id);
    if (delivery.status === 'pending') return { requeued: (await this.store.makeDeliveryDueNow(numeric, this.now())) ? 1 : 0 };
    throw new ApiError('delivery_not_failed', `delivery ${numeric} is ${delivery.status}; only failed or pending deliveries can be retried`);
  }

  /** Puts every failed delivery back (of one source, and/or failed since a time): `{sourceId?, since?}`. */
  async retryAll(input: unknown): Promise<{ requeued: number }> {
    const body = input === undefined || input === null ? {} : requireObject(input);
    rejectUnknownFields(body, ['sourceId', 'since']);
    const sourceId = optionalString(body['sourceId'], 'sourceId');
    refuseNul(sourceId, 'sourceId');
    if (sourceId !== undefined && (await this.store.getSource(sourceId)) === undefined) {
      throw new ApiError('not_found', `no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
    }
    const since = timeParam(body['since'], 'since');
    return { requeued: await this.store.requeueFailedDeliveries({ sourceId, since }, this.now()) };
  }
}

/** `message`: the stored message, parsed (see {@link parseBody}), which the view summarizes. */
function viewDelivery(record: DeliveryRecord, message: unknown): DeliveryView {
  const functionId = functionIdOf(record.destination);
  return {
    id: record.id,
    sourceId: record.sourceId,
    destination: functionId === undefined ? record.destination : 'function',
    ...(functionId !== undefined && { functionId }),
    messageSeq: record.messageSeq,
    ...(record.messageId !== undefined && { messageId: record.messageId }),
    ...summary(message),
    status: record.status,
    attemptCount: record.attemptCount,
    createdAt: iso(record.createdAt),
    updatedAt: iso(record.updatedAt),
    ...(record.status === 'pending' && record.nextAttemptAt !== undefined && { nextAttemptAt: iso(record.nextAttemptAt) }),
    ...(record.firstAttemptAt !== undefined && { firstAttemptAt: iso(record.firstAttemptAt) }),
    ...(record.lastError !== undefined && { lastError: record.lastError }),
    ...(record.replayId !== undefined && { replayId: record.replayId }),
    ...(record.waitingFor !== undefined && { waitingFor: record.waitingFor }),
  };
}

function viewDetail(detail: DeliveryDetail): DeliveryDetailView {
  const message = parseBody(detail.messageBody);
  return { ...viewDelivery(detail, message), ...(message !== undefined && { message }), attempts: detail.attempts.map(viewAttempt) };
}

/** The stored message; its text as it is should it not parse (ingest stores JSON text only). */
function parseBody(body: string | undefined): unknown {
  if (body === undefined) return undefined;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return body;
  }
}

/** What the list shows of a delivery's message: the string fields among type, event, userId and anonymousId. */
function summary(message: unknown): Pick<DeliveryView, 'type' | 'event' | 'userId' | 'anonymousId'> {
  if (typeof message !== 'object' || message === null) return {};
  const fields: Record<string, string> = {};
  for (const field of ['type', 'event', 'userId', 'anonymousId'] as const) {
    const value = (message as Record<string, unknown>)[field];
    if (typeof value === 'string') fields[field] = value;
  }
  return fields;
}

function viewAttempt(attempt: AttemptRecord): AttemptView {
  return {
    at: iso(attempt.at),
    url: attempt.url,
    ...(attempt.statusCode !== undefined && { statusCode: attempt.statusCode }),
    ...(attempt.error !== undefined && { error: attempt.error }),
    durationMs: attempt.durationMs,
    ...(attempt.response !== undefined && { response: attempt.response }),
    ...(attempt.functionRun !== undefined && { function: attempt.functionRun }),
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function deliveryId(value: unknown, field = 'id'): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new ApiError('invalid_request', `${field} must be a delivery id (a positive integer)`);
  return n;
}

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new ApiError('invalid_request', `${field} must be a string`);
  return value;
}

/**
 * A userId or messageId to match exactly, bounded and named as ingest
 * bounds and stores ids (MAX_ID_BYTES, storedId): a message cannot carry a
 * longer one, so neither can the filter.
 */
function messageField(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '' || !idWithinBounds(value)) {
    throw new ApiError('invalid_request', `${field} must be a non-empty string of at most ${MAX_ID_BYTES} bytes (UTF-8)`);
  }
  return storedId(value);
}

function notFound(id: unknown): ApiError {
  return new ApiError('not_found', `no delivery with id ${JSON.stringify(String(id).slice(0, 30))}`);
}
