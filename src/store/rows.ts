/**
 * Rows of the sources, destinations, messages, deliveries, delivery_attempts,
 * raw_requests and regulation_sources tables as both adapters read them (the same column names and, once the
 * PostgreSQL adapter has parsed int8, the same types), and their mapping to
 * the records of the Store interface.
 */
import type { MessageStatus } from '../domain/message.js';
import type { RegulationStepStatus } from '../domain/regulation.js';
import type { DeliveryTarget, DestinationKind } from '../domain/routing.js';
import type {
  AttemptRecord,
  AttemptResponse,
  FunctionRunRecord,
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryStatus,
  DestinationRecord,
  RawRequest,
  RegulationSourceRecord,
  ReplayRecord,
  ReplayStatus,
  SourceRecord,
  StoredMessage,
} from './store.js';

/** `enabled` is a boolean on PostgreSQL and 0 or 1 on SQLite. */
export interface SourceRow {
  id: string;
  name: string;
  write_key: string;
  enabled: boolean | number;
  created_at: number;
  updated_at: number;
}

export function toSource(row: SourceRow): SourceRecord {
  return {
    id: row.id,
    name: row.name,
    writeKey: row.write_key,
    enabled: Boolean(row.enabled),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** `enabled` is a boolean on PostgreSQL and 0 or 1 on SQLite; `settings` is JSON text. */
export interface DestinationRow {
  source_id: string;
  kind: DestinationKind;
  enabled: boolean | number;
  settings: string;
  updated_at: number;
}

export function toDestination(row: DestinationRow): DestinationRecord {
  return {
    sourceId: row.source_id,
    kind: row.kind,
    enabled: Boolean(row.enabled),
    settings: JSON.parse(row.settings) as unknown,
    updatedAt: row.updated_at,
  };
}

export interface DeliveryRow {
  id: number;
  source_id: string;
  message_seq: number;
  destination: DeliveryTarget;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: number | null;
  first_attempt_at: number | null;
  retry_urls: string | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  message_id?: string | null;
  /** The message's stored JSON text (null once it is gone). */
  message_body?: string | null;
  replay_id?: string | null;
  /** The delivery of the same key before it (ordered deliveries and replays); see docs/architecture.md. */
  after_id?: number | string | null;
}

/** A delivery as a claim returns it: its row and its message's body (null once the message is gone). */
export interface ClaimRow extends DeliveryRow {
  body: string | null;
  /** The message's stored traceparent. */
  traceparent?: string | null;
  /** Why it must not be sent any more (see ClaimedDelivery.cancelled). */
  cancelled?: string | null;
  /** The body is the delivery's own, a transformation's output (see ClaimedDelivery.transformed). */
  transformed?: boolean;
}

/** The columns of a claimed row that {@link toClaimedDelivery} reads. */
export type ClaimedRow = Pick<
  ClaimRow,
  'id' | 'source_id' | 'destination' | 'message_seq' | 'body' | 'attempt_count' | 'first_attempt_at' | 'retry_urls' | 'created_at' | 'replay_id' | 'traceparent' | 'cancelled' | 'transformed'
>;

export function toClaimedDelivery(row: ClaimedRow): ClaimedDelivery {
  return {
    id: row.id,
    sourceId: row.source_id,
    destination: row.destination,
    messageSeq: row.message_seq,
    body: row.body ?? 'null',
    ...(row.transformed === true && { transformed: true }),
    attemptCount: row.attempt_count,
    firstAttemptAt: row.first_attempt_at ?? undefined,
    retryUrls: row.retry_urls === null ? undefined : (JSON.parse(row.retry_urls) as string[]),
    createdAt: row.created_at,
    ...(row.replay_id !== null && row.replay_id !== undefined && { replayId: row.replay_id }),
    ...(row.traceparent !== null && row.traceparent !== undefined && { traceparent: row.traceparent }),
    ...(row.cancelled !== null && row.cancelled !== undefined && { cancelled: row.cancelled }),
  };
}

export interface AttemptRow {
  at: number;
  url: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  /** JSON of AttemptResponse; null for attempts without an answer or recorded before it was kept. */
  response: string | null;
  /** JSON of FunctionRunRecord; only for a function destination's attempts. */
  function_run?: string | null;
}

export interface MessageRow {
  seq: number;
  source_id: string;
  status: MessageStatus;
  reason: string | null;
  type: string | null;
  message_id: string | null;
  user_id: string | null;
  received_at: number;
  body: string;
  transform?: string | null;
}

export function toDeliveryRecord(row: DeliveryRow): DeliveryRecord {
  return {
    id: row.id,
    sourceId: row.source_id,
    destination: row.destination,
    messageSeq: row.message_seq,
    messageId: row.message_id ?? undefined,
    status: row.status,
    attemptCount: row.attempt_count,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    nextAttemptAt: row.next_attempt_at ?? undefined,
    firstAttemptAt: row.first_attempt_at ?? undefined,
    lastError: row.last_error ?? undefined,
    ...(row.replay_id !== null && row.replay_id !== undefined && { replayId: row.replay_id }),
    ...(row.message_body !== null && row.message_body !== undefined && { messageBody: row.message_body }),
    // Pending without a next attempt: not claimable until its predecessor ends.
    ...(row.status === 'pending' && row.next_attempt_at === null && row.after_id !== null && row.after_id !== undefined && { waitingFor: Number(row.after_id) }),
  };
}

export interface ReplayRow {
  id: string;
  source_id: string;
  from_at: number;
  to_at: number;
  receivers: string | null;
  types: string | null;
  events: string | null;
  status: ReplayStatus;
  cursor_seq: number;
  queued: number;
  delivered: number;
  failed: number;
  created_at: number;
  updated_at: number;
}

/** Shared by both adapters: list columns hold JSON arrays or NULL. */
export function toReplayRecord(row: ReplayRow): ReplayRecord {
  const list = (value: string | null): string[] | undefined => (value === null ? undefined : (JSON.parse(value) as string[]));
  return {
    id: row.id,
    sourceId: row.source_id,
    from: row.from_at,
    to: row.to_at,
    receivers: list(row.receivers),
    types: list(row.types),
    events: list(row.events),
    status: row.status,
    cursor: row.cursor_seq,
    queued: row.queued,
    delivered: row.delivered,
    failed: row.failed,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toAttemptRecord(row: AttemptRow): AttemptRecord {
  return {
    at: row.at,
    url: row.url,
    statusCode: row.status_code ?? undefined,
    error: row.error ?? undefined,
    durationMs: row.duration_ms,
    ...(row.response !== null && row.response !== undefined && { response: JSON.parse(row.response) as AttemptResponse }),
    ...(row.function_run !== null && row.function_run !== undefined && { functionRun: JSON.parse(row.function_run) as FunctionRunRecord }),
  };
}

export function toStoredMessage(row: MessageRow): StoredMessage {
  return {
    seq: row.seq,
    sourceId: row.source_id,
    status: row.status,
    reason: row.reason ?? undefined,
    type: row.type ?? undefined,
    messageId: row.message_id ?? undefined,
    userId: row.user_id ?? undefined,
    receivedAt: row.received_at,
    body: row.body,
    ...(row.transform !== null && row.transform !== undefined && { transform: row.transform }),
  };
}

export interface RegulationSourceRow {
  regulation_id: string;
  source_id: string;
  status: RegulationStepStatus;
  error: string | null;
  updated_at: number;
}

export function toRegulationSourceRecord(row: RegulationSourceRow): RegulationSourceRecord {
  return { sourceId: row.source_id, status: row.status, error: row.error ?? undefined, updatedAt: row.updated_at };
}

export interface RawRequestRow {
  seq: number;
  source_id: string;
  route: string;
  received_at: number;
  ip: string | null;
  config_version: number;
  message_count: number;
  headers: string | null;
  body: string;
}

export function toRawRequest(row: RawRequestRow): RawRequest {
  return {
    seq: row.seq,
    sourceId: row.source_id,
    route: row.route,
    receivedAt: row.received_at,
    ip: row.ip ?? undefined,
    configVersion: row.config_version,
    messageCount: row.message_count,
    headers: row.headers ?? undefined,
    body: row.body,
  };
}
