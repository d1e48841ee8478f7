/**
 * Analytics messages as the Tracking API receives and stores them.
 *
 * Glossary
 * - call: one of the six message kinds a client sends (identify, track, page,
 *   screen, group, alias); `batch` carries several calls.
 * - message: one call as stored, after normalization.
 * - status: what ingest decided for a message, shown in the source's debugger.
 */

export const CALL_TYPES = ['identify', 'track', 'page', 'screen', 'group', 'alias'] as const;
export type CallType = (typeof CALL_TYPES)[number];

export function isCallType(value: unknown): value is CallType {
  return typeof value === 'string' && (CALL_TYPES as readonly string[]).includes(value);
}

/** A JSON object as parsed from a request. Values are untrusted. */
export type JsonObject = { [key: string]: unknown };

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * - accepted: valid and new; routed to the source's destinations.
 * - rejected: broke a rule (the reason says which); not routed.
 * - duplicate: its messageId was seen on the same source within 24 hours; not routed.
 * - suppressed: its user is under a suppression request; not routed.
 * - filtered: valid and new, but a destination filter dropped it (the reason names the filter); not routed.
 * - blocked: the source's tracking plan blocks it (the reason lists the violations); not routed, not seen by Engage.
 */
/**
 * `failed`: its transformation threw, timed out or gave no message (set after processing, by the transform stage).
 * `blocked`: its source's tracking plan blocked it (no delivery, no profile update).
 */
export type MessageStatus = 'accepted' | 'rejected' | 'duplicate' | 'suppressed' | 'filtered' | 'blocked' | 'failed';

/** Request size limits of the Tracking API, in bytes after decompression. */
export const LIMITS = Object.freeze({
  callBytes: 32 * 1024,
  batchBytes: 500 * 1024,
  batchElementBytes: 32 * 1024,
  batchElements: 2_500,
  /**
   * A batch's messages as stored, with the batch's `context` and
   * `integrations` copied into each: the body plus one copy of them per
   * element. Without it a small batch with a large shared `context` is
   * stored many times over (30 KB × 2,500 elements from a 136 KB body).
   */
  batchStoredBytes: 1024 * 1024,
  /** Deeper values are rejected so that every stored message can be serialized safely. */
  nestingDepth: 64,
});

/** How long a messageId counts as already seen on a source. */
export const DEDUPLICATION_WINDOW_MS = 24 * 3_600_000;
