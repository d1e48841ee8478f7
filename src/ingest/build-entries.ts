import { type HeaderDefaults, applyHeaderDefaults } from '../domain/browser-settings.js';
import { type DestinationFilter, applyFilters } from '../domain/destination-filters.js';
import type { CallType, JsonObject } from '../domain/message.js';
import { LIMITS, isJsonObject } from '../domain/message.js';
import { sanitizeJson } from '../domain/json-safety.js';
import { type CallContext, type PreparedCall, parseInstant, prepareCall } from '../domain/normalize.js';
import { suppressionReason } from '../domain/regulation.js';
import { type DeliveryTarget, type DestinationKind, isRoutedTo, isRoutedToName } from '../domain/routing.js';
import { shapeOf } from '../domain/observed-schema.js';
import { type CompiledPlan } from '../domain/tracking-plan.js';
import { checkAgainstPlan, type Violation } from '../domain/tracking-plan-check.js';
import { ApiError } from '../errors.js';
import type { IngestEntry, SourceRecord } from '../store/store.js';

export interface RequestFacts {
  readonly source: SourceRecord;
  /** Enabled destinations of the source. */
  readonly destinations: readonly DestinationKind[];
  /** The source's enabled function destinations (their names are their integrations keys). */
  readonly functions?: ReadonlyArray<{ readonly target: DeliveryTarget; readonly name: string }> | undefined;
  /** The filters of the source's Webhooks destination, applied at routing time (to its function destinations too). */
  readonly webhookFilters: readonly DestinationFilter[];
  /** The Webhooks destination orders per user (`settings.ordering: "user"`). */
  readonly orderedWebhooks?: boolean | undefined;
  /**
   * The suppression screen (`SuppressionList.regulationFor`): the regulation
   * suppressing a user on a source, or undefined.
   */
  readonly suppressedBy?: ((sourceId: string, userId: string) => string | undefined) | undefined;
  readonly receivedAt: number;
  readonly receivedAtIso: string;
  readonly ip: string | undefined;
  readonly newMessageId: () => string;
  /** The source's tracking plan, compiled (`SourceDirectory.trackingPlan`); undefined: none, nothing checked. */
  readonly trackingPlan?: CompiledPlan | undefined;
}

/** Turns a single call's body into the one entry to store. */
export function entriesForCall(body: JsonObject, type: CallType, facts: RequestFacts): IngestEntry[] {
  return [toEntry(prepareCall(body, callContext(facts, type, undefined)), facts)];
}

/**
 * The checks of a batch body that refuse it as a whole (400), made by
 * ingest before it stores the raw request: not a batch, too many elements,
 * an element over its size limit. Returns the element count.
 */
export function checkBatch(body: JsonObject, bodyBytes: number, text: string | undefined, request: BatchRequestFacts): number {
  const elements = body['batch'];
  if (!Array.isArray(elements)) {
    throw new ApiError('invalid_batch', 'a batch call needs a "batch" array of messages');
  }
  if (elements.length > LIMITS.batchElements) {
    throw new ApiError('too_many_batch_elements', `a batch holds at most ${LIMITS.batchElements} messages, got ${elements.length}`);
  }
  const tooDeep = clearBatchEnvelope(body);
  if (tooDeep !== undefined) throw new ApiError('invalid_batch', `the batch's "${tooDeep}" nests deeper than ${LIMITS.nestingDepth} levels`);
  const envelope = envelopeBytes(body);
  if (envelope > 0 && bodyBytes + elements.length * envelope > LIMITS.batchStoredBytes) {
    throw new ApiError(
      'batch_too_large',
      `the batch's context and integrations (${envelope} bytes) are copied into each of its ${elements.length} messages, over ${LIMITS.batchStoredBytes / 1024} KB stored in all: send them in smaller batches, or in the messages that need them`,
    );
  }
  // None can be over the limit when the whole body is under it. The limit
  // applies to the message as stored, which adds to the element what
  // processing fills in (messageId, timestamps, the batch's context): that
  // margin is counted against the element first, and only an element it
  // puts over the limit is prepared as processing will to measure it exactly.
  if (bodyBytes > LIMITS.batchElementBytes - STORED_MARGIN_BYTES) {
    const shared = envelope + STORED_MARGIN_BYTES;
    // A bound read off the text spares serializing every element of a large
    // batch of small ones; only when it allows an element over the limit is
    // each element measured exactly.
    if (text !== undefined && nestedValueBound(text, Buffer.byteLength(text) === text.length ? 1 : 3) + shared <= LIMITS.batchElementBytes) return elements.length;
    elements.forEach((element, index) => {
      const serialized = JSON.stringify(element) ?? '';
      if (
        serialized.length + shared > LIMITS.batchElementBytes / 3 &&
        Buffer.byteLength(serialized) + shared > LIMITS.batchElementBytes &&
        storedBytes(body, element, request) > LIMITS.batchElementBytes
      ) {
        throw new ApiError('batch_element_too_large', `batch element ${index} is over ${LIMITS.batchElementBytes / 1024} KB`);
      }
    });
  }
  return elements.length;
}

/**
 * The batch's `context` and `integrations` go into every element, so they
 * are cleared of `__proto__` keys like a message and held to a message's
 * nesting limit (less the level they sit at). Returns the one that nests too
 * deep, if any: then every element would, and serializing it could overflow
 * the stack, so ingest refuses the batch as a whole (`checkBatch`).
 */
function clearBatchEnvelope(body: JsonObject): 'context' | 'integrations' | undefined {
  for (const key of ['context', 'integrations'] as const) {
    if (sanitizeJson(body[key], LIMITS.nestingDepth - 1).tooDeep) return key;
  }
  return undefined;
}

/** The UTF-8 bytes of the batch's `context` and `integrations` as JSON, which processing copies into every element (0 when it has neither). */
function envelopeBytes(body: JsonObject): number {
  let bytes = 0;
  for (const key of ['context', 'integrations'] as const) {
    const value = body[key];
    if (value !== undefined) bytes += Buffer.byteLength(JSON.stringify(value) ?? '');
  }
  return bytes;
}

/** What the size of a batch element as stored depends on besides the body. */
export interface BatchRequestFacts {
  readonly receivedAt: number;
  readonly ip: string | undefined;
  readonly headers: HeaderDefaults;
}

/**
 * An upper bound of the UTF-8 size of `JSON.stringify` of any value nested
 * two deep in the valid JSON object `text` (so of every element of its
 * `batch` array): the largest span between the separators of a top-level
 * value's members. Re-serializing never lengthens JSON text (whitespace
 * and escapes only shrink, keys only vanish when repeated) except a number
 * with an exponent (`1e20` is written in 21 digits, none is written in more
 * than 24 characters), so each `e` outside strings counts 24 more.
 * `bytesPerChar`: 1 when the text is ASCII, else 3 (a UTF-16 unit is at
 * most 3 bytes of UTF-8).
 */
export function nestedValueBound(text: string, bytesPerChar: number): number {
  let depth = 0;
  let largest = 0;
  let current = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: its closing quote is the first one after an even run of backslashes.
      let end = i + 1;
      for (;;) {
        end = text.indexOf('"', end);
        if (end < 0) return Infinity; // not valid JSON: no bound
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
        end++;
      }
      if (depth >= 2) current += (end - i + 1) * bytesPerChar;
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 2) current = 0;
      else if (depth > 2) current++;
    } else if (c === 0x7d || c === 0x5d) {
      if (depth === 2) {
        if (current > largest) largest = current;
        current = 0;
      } else if (depth > 2) current++;
      depth--;
    } else if (depth === 2 && (c === 0x2c || c === 0x3a)) {
      if (current > largest) largest = current;
      current = 0;
    } else if (depth >= 2) {
      // Outside strings valid JSON is ASCII.
      current += c === 0x65 || c === 0x45 ? 25 : 1;
    }
  }
  return largest;
}

/** What processing adds to a batch element besides the batch's context and integrations (ids, timestamps, library): at most this. */
const STORED_MARGIN_BYTES = 512;

/** As long as the ids processing generates (`randomUUID`), for measuring. */
const GENERATED_ID_STAND_IN = '00000000-0000-0000-0000-000000000000';

/** The size of one batch element as processing will store it (on copies: the body is left as parsed). */
function storedBytes(body: JsonObject, element: unknown, request: BatchRequestFacts): number {
  const copy = isJsonObject(element) ? { ...element } : element;
  const alone: JsonObject = { batch: [copy] };
  if (body['sentAt'] !== undefined) alone['sentAt'] = body['sentAt'];
  applyHeaderDefaults(alone, 'batch', request.headers);
  const receivedAtIso = new Date(request.receivedAt).toISOString();
  const ctx = callContext({ receivedAt: request.receivedAt, receivedAtIso, ip: request.ip, newMessageId: () => GENERATED_ID_STAND_IN }, undefined, {
    sentAt: parseInstant(body['sentAt']),
    context: isJsonObject(body['context']) ? body['context'] : undefined,
    integrations: isJsonObject(body['integrations']) ? body['integrations'] : undefined,
  });
  return Buffer.byteLength(JSON.stringify(prepareCall(copy, ctx).message));
}

/**
 * Turns a batch body into entries, one per element. The batch as a whole is
 * refused (400) only when it is not a batch at all or breaks a size limit;
 * a bad element is stored as rejected and the others go on.
 */
export function entriesForBatch(body: JsonObject, bodyBytes: number, facts: RequestFacts): IngestEntry[] {
  const elements = body['batch'];
  if (!Array.isArray(elements)) {
    throw new ApiError('invalid_batch', 'a batch call needs a "batch" array of messages');
  }
  if (elements.length > LIMITS.batchElements) {
    throw new ApiError('too_many_batch_elements', `a batch holds at most ${LIMITS.batchElements} messages, got ${elements.length}`);
  }
  // Ingest refused an envelope nesting too deep before its 200; this clears
  // the `__proto__` keys of the copy processing parsed.
  clearBatchEnvelope(body);
  const ctx = callContext(facts, undefined, {
    sentAt: parseInstant(body['sentAt']),
    context: isJsonObject(body['context']) ? body['context'] : undefined,
    integrations: isJsonObject(body['integrations']) ? body['integrations'] : undefined,
  });
  const entries = elements.map((element) => toEntry(prepareCall(element, ctx), facts));
  // The limit applies to each message as stored (serialized once, for the
  // store); none can be over it when the whole body is under it.
  if (bodyBytes > LIMITS.batchElementBytes) {
    entries.forEach((entry, index) => {
      if (entry.body.length > LIMITS.batchElementBytes / 3 && Buffer.byteLength(entry.body) > LIMITS.batchElementBytes) {
        throw new ApiError('batch_element_too_large', `batch element ${index} is over ${LIMITS.batchElementBytes / 1024} KB`);
      }
    });
  }
  return entries;
}

function callContext(facts: Pick<RequestFacts, 'receivedAt' | 'receivedAtIso' | 'ip' | 'newMessageId'>, pathType: CallType | undefined, batch: CallContext['batch']): CallContext {
  return { receivedAt: facts.receivedAt, receivedAtIso: facts.receivedAtIso, ip: facts.ip, pathType, batch, newMessageId: facts.newMessageId };
}

/**
 * The one place ingest decides a message's status (but `duplicate`, which
 * the store decides as it commits): `rejected` when the call is invalid or
 * the source disabled (the reason tells the client what it got wrong);
 * `filtered` when the Webhooks filters drop it and nothing else gets it;
 * `suppressed` when it would be accepted but its user is suppressed on the
 * source (with the regulation as the reason, routed nowhere); else
 * `accepted`, with the destinations it is routed to.
 */
function toEntry(call: PreparedCall, facts: RequestFacts): IngestEntry {
  const sourceId = facts.source.id;
  const suppressedBy = call.ok && call.userId !== undefined ? facts.suppressedBy?.(sourceId, call.userId) : undefined;
  // The observed schema records the message as received: before a plan omits anything.
  const shape = call.ok && facts.source.enabled ? shapeOf(call.message, call.type) : undefined;
  // The tracking plan, after suppression and before routing: it may change
  // the body every later consumer sees (omit, flag) or block the message.
  const plan = call.ok && suppressedBy === undefined && facts.source.enabled && facts.trackingPlan !== undefined ? checkAgainstPlan(facts.trackingPlan, call.message, call.type) : undefined;
  // One object literal of one shape for every status (no spreads): this runs
  // once per message, and spreads were a visible share of its CPU.
  const body = JSON.stringify(call.message);
  const receivedAt = facts.receivedAt;
  const entry = (status: IngestEntry['status'], reason: string | undefined, destinations: readonly DeliveryTarget[]): IngestEntry => ({
    sourceId,
    status,
    reason,
    type: call.type,
    messageId: call.ok ? call.messageId : undefined,
    userId: call.userId,
    receivedAt,
    body,
    destinations,
    orderKey: call.ok && facts.orderedWebhooks === true && destinations.includes('webhooks') ? call.orderKey : undefined,
    shape,
    violations: plan !== undefined && plan.violations.length > 0 ? plan.violations : undefined,
  });
  if (!call.ok) return entry('rejected', call.reason, NONE);
  if (!facts.source.enabled) return entry('rejected', 'the source is disabled', NONE);
  if (plan?.action === 'block') return entry('blocked', blockedReason(plan.violations), NONE);
  const integrations = call.message['integrations'];
  const routedKinds = facts.destinations.filter((kind) => isRoutedTo(integrations, kind));
  const functions = facts.functions;
  // Function destinations after the Webhooks destination, by their names.
  const routed: readonly DeliveryTarget[] =
    functions === undefined || functions.length === 0 ? routedKinds : [...routedKinds, ...functions.filter((f) => isRoutedToName(integrations, f.name)).map((f) => f.target)];
  const accepted = (destinations: readonly DeliveryTarget[]): IngestEntry =>
    suppressedBy === undefined ? entry('accepted', undefined, destinations) : entry('suppressed', suppressionReason(suppressedBy), NONE);
  // The source's filters (kept with its Webhooks destination) apply to its function destinations too.
  if (facts.webhookFilters.length > 0 && routed.length > 0) {
    const verdict = applyFilters(facts.webhookFilters, call.message);
    if (verdict.kind === 'filtered') {
      const others = routed.filter((kind) => kind !== 'webhooks' && !kind.startsWith('function:'));
      if (others.length === 0) return entry('filtered', `filter "${verdict.title}"`, NONE);
      return accepted(others);
    }
  }
  return accepted(routed);
}

const NONE: readonly DeliveryTarget[] = [];

/** A blocked message's reason: its violations, as JSON (the debugger shows it; the body's context has them too). */
function blockedReason(violations: readonly Violation[]): string {
  return `tracking plan: ${JSON.stringify(violations.map((v) => ({ type: v.type, message: v.message, property: v.property })))}`.slice(0, 2_000);
}
