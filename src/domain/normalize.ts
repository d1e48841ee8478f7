import { sanitizeJson } from './json-safety.js';
import { type CallType, type JsonObject, LIMITS, isCallType, isJsonObject } from './message.js';

/** What ingest knows about the request a call came in. */
export interface CallContext {
  /** Server time the request was received, in epoch milliseconds, and as ISO-8601 (made once per request). */
  readonly receivedAt: number;
  readonly receivedAtIso: string;
  /** The client's address as seen by the server. */
  readonly ip: string | undefined;
  /** The call type fixed by the path (`/v1/track`); undefined for batch elements. */
  readonly pathType: CallType | undefined;
  /** A batch's own `sentAt` (see {@link parseInstant}), `context` and `integrations`, applied to each element. */
  readonly batch?: { readonly sentAt: Instant | undefined; readonly context: unknown; readonly integrations: unknown };
  /** Makes a `messageId` for calls that came without one. */
  readonly newMessageId: () => string;
}

export interface AcceptedCall {
  readonly ok: true;
  readonly type: CallType;
  readonly messageId: string;
  readonly userId: string | undefined;
  /** The ordering key: the userId, else the anonymousId (an accepted call has one of them). */
  readonly orderKey: string;
  readonly message: JsonObject;
}

export interface RejectedCall {
  readonly ok: false;
  /** Sentence a person understands, shown in the source's debugger. */
  readonly reason: string;
  readonly type: string | undefined;
  readonly userId: string | undefined;
  /** The call as received (without its write key), or a summary when it cannot be kept whole. */
  readonly message: JsonObject;
}

export type PreparedCall = AcceptedCall | RejectedCall;

/** Library names of browser SDKs, whose calls get `context.ip` from the request. */
const BROWSER_LIBRARIES = new Set(['analytics.js', 'analytics-next', '@segment/analytics-next', 'RudderLabs JavaScript SDK']);
/** How much of a rejected message's messageId its summary keeps, in characters. */
export const MAX_ID_LENGTH = 1_024;
/**
 * The longest userId, anonymousId, groupId, previousId or messageId a
 * message may carry, in bytes of UTF-8 (so at most 1,024 characters too).
 * The ids are indexed columns on PostgreSQL, whose B-tree refuses an entry
 * over ~2,700 bytes: a bound of 1,024 characters let ids outside ASCII (up
 * to 3 bytes each) through, and the processing transaction holding one
 * failed on every try, stalling every message behind it.
 */
export const MAX_ID_BYTES = 1_024;

/**
 * An id as it is stored: PostgreSQL text cannot hold U+0000, and ids land
 * in many of its columns (profiles' identities, ordered delivery's tails)
 * besides the message's, so U+FFFD takes its place on both stores, in the
 * body too. Filters and deletion subjects name ids the same way, and the
 * observed schema its event names and property keys.
 */
export function storedId(id: string): string {
  return id.includes('\u0000') ? id.replaceAll('\u0000', '\uFFFD') : id;
}

/** Whether `id` fits in {@link MAX_ID_BYTES}. */
export function idWithinBounds(id: string): boolean {
  // A UTF-16 unit is at most 3 bytes of UTF-8: short ids need no count.
  return id.length * 3 <= MAX_ID_BYTES || Buffer.byteLength(id, 'utf8') <= MAX_ID_BYTES;
}

/**
 * Validates one call and turns it into the message Switchyard stores and
 * routes: adds `messageId`, `receivedAt`, `originalTimestamp`, a clock-skew
 * corrected `timestamp`, `sentAt` and, for direct or browser calls,
 * `context.ip`; merges a batch's `context` and `integrations` under the
 * call's own; drops the write key. Never throws on untrusted input.
 */
export function prepareCall(raw: unknown, ctx: CallContext): PreparedCall {
  if (!isJsonObject(raw)) {
    return reject('batch element is not a JSON object', undefined, undefined, { value: summarize(raw) });
  }
  if (sanitizeJson(raw, LIMITS.nestingDepth).tooDeep) {
    const type = typeof raw['type'] === 'string' ? raw['type'] : ctx.pathType;
    return reject(`message nests deeper than ${LIMITS.nestingDepth} levels`, type, undefined, {
      type,
      messageId: typeof raw['messageId'] === 'string' ? raw['messageId'].slice(0, MAX_ID_LENGTH) : undefined,
    });
  }

  // Object.assign, not a spread: V8 gives a spread copy a map that adding
  // the stamped fields (receivedAt, originalTimestamp) makes slow, for those
  // additions and for JSON.stringify of the message (several µs a message).
  // Safe as a copy: sanitizeJson removed every own `__proto__` key above.
  const message: JsonObject = Object.assign({}, raw);
  if (message['writeKey'] !== undefined) delete message['writeKey'];

  const type = ctx.pathType ?? raw['type'];
  if (!isCallType(type)) {
    return reject(`batch element without a valid type (got ${describe(raw['type'])})`, undefined, undefined, message);
  }
  message['type'] = type;

  const context = mergeUnder(ctx.batch?.context, raw['context']);
  if (context === INVALID) return reject('context must be an object', type, undefined, message);
  const integrations = mergeUnder(ctx.batch?.integrations, raw['integrations']);
  if (integrations === INVALID) return reject('integrations must be an object', type, undefined, message);
  if (context !== undefined) message['context'] = context;
  if (integrations !== undefined) message['integrations'] = integrations;

  const userId = readId(message, 'userId');
  const anonymousId = readId(message, 'anonymousId');
  for (const id of [userId, anonymousId]) {
    if (id.error !== undefined) return reject(id.error, type, undefined, message);
  }
  const user = userId.value;
  if (user === undefined && anonymousId.value === undefined) {
    return reject('neither userId nor anonymousId', type, undefined, message);
  }

  const ruleBroken = checkCallRules(type, message);
  if (ruleBroken !== undefined) return reject(ruleBroken, type, user, message);

  const messageId = readId(message, 'messageId');
  if (messageId.error !== undefined) return reject(messageId.error, type, user, message);
  stampCall(message, messageId.value, ctx);
  if (context !== undefined && context['ip'] === undefined && ctx.ip !== undefined && wantsRequestIp(context)) {
    context['ip'] = ctx.ip;
  }

  return { ok: true, type, messageId: message['messageId'] as string, userId: user, orderKey: (user ?? anonymousId.value)!, message };
}

/**
 * What ingest stamps on an accepted call: its `messageId` (a new one when
 * it came without), `receivedAt`, `sentAt`, `originalTimestamp` and the
 * skew-corrected `timestamp`. Exported for test runs of code
 * (`test-event.ts`), which stamp an event ingest would reject the same way.
 */
export function stampCall(message: JsonObject, messageId: string | undefined, ctx: CallContext): void {
  message['messageId'] = messageId ?? ctx.newMessageId();
  stampTimes(message, ctx);
}

function reject(reason: string, type: string | undefined, userId: string | undefined, message: JsonObject): RejectedCall {
  return { ok: false, reason, type, userId, message };
}

function checkCallRules(type: CallType, message: JsonObject): string | undefined {
  switch (type) {
    case 'track': {
      const event = message['event'];
      if (event === undefined || event === null || event === '') return 'track call without event';
      if (typeof event !== 'string') return `track event must be a string (got ${describe(event)})`;
      return objectField(message, 'properties');
    }
    case 'group': {
      const groupId = readId(message, 'groupId');
      if (groupId.error !== undefined) return groupId.error;
      if (groupId.value === undefined) return 'group call without groupId';
      return objectField(message, 'traits');
    }
    case 'alias': {
      const previousId = readId(message, 'previousId');
      if (previousId.error !== undefined) return previousId.error;
      if (previousId.value === undefined) return 'alias call without previousId';
      return undefined;
    }
    case 'identify':
      return objectField(message, 'traits');
    case 'page':
    case 'screen': {
      const name = message['name'];
      if (name !== undefined && name !== null && typeof name !== 'string') {
        return `${type} name must be a string (got ${describe(name)})`;
      }
      return objectField(message, 'properties');
    }
  }
}

function objectField(message: JsonObject, field: string): string | undefined {
  const value = message[field];
  if (value === undefined || value === null || isJsonObject(value)) return undefined;
  return `${field} must be an object (got ${describe(value)})`;
}

/**
 * Reads an identifier that clients send as a string or, sometimes, a number.
 * Numbers are stored as strings; empty and null count as absent.
 */
function readId(message: JsonObject, field: string): { value?: string; error?: string } {
  const value = message[field];
  if (value === undefined || value === null || value === '') {
    if (value !== undefined) delete message[field];
    return {};
  }
  if (typeof value === 'number' && Number.isFinite(value)) {
    message[field] = String(value);
    return { value: String(value) };
  }
  if (typeof value !== 'string') return { error: `${field} must be a string (got ${describe(value)})` };
  if (!idWithinBounds(value)) return { error: `${field} is longer than ${MAX_ID_BYTES} bytes (UTF-8)` };
  // Left in, a U+0000 would fail its processing transaction on PostgreSQL on every try (see storedId).
  const stored = storedId(value);
  if (stored !== value) message[field] = stored;
  return { value: stored };
}

const INVALID = Symbol('invalid');

/** `inner` over `outer`, both optional objects; the inner (the call's own) wins. */
function mergeUnder(outer: unknown, inner: unknown): JsonObject | undefined | typeof INVALID {
  const hasInner = inner !== undefined && inner !== null;
  if (hasInner && !isJsonObject(inner)) return INVALID;
  const base = isJsonObject(outer) ? outer : undefined;
  // Object.assign, not spreads, as for the message (see prepareCall): both sanitized.
  if (base === undefined) return hasInner ? Object.assign({}, inner) : undefined;
  return hasInner ? Object.assign({}, base, inner) : Object.assign({}, base);
}

/**
 * Sets receivedAt, sentAt, originalTimestamp and timestamp. A timestamp that
 * does not parse as a date is ignored rather than rejected: the message is
 * still worth keeping, stamped with the time it was received.
 */
function stampTimes(message: JsonObject, ctx: CallContext): void {
  const timestamp = message['timestamp'];
  const original = parseTime(timestamp);
  const sentAt = ctx.batch?.sentAt ?? parseInstant(message['sentAt']);
  message['receivedAt'] = ctx.receivedAtIso;
  if (sentAt !== undefined) message['sentAt'] = sentAt.iso;
  else if (message['sentAt'] !== undefined) delete message['sentAt'];
  if (original === undefined) {
    message['timestamp'] = ctx.receivedAtIso;
    return;
  }
  message['originalTimestamp'] = timestamp;
  const corrected = sentAt === undefined ? original : ctx.receivedAt - (sentAt.ms - original);
  // A client's clock agreeing with ours (to the millisecond) gives the receive time, formatted once per request.
  message['timestamp'] = corrected === ctx.receivedAt ? ctx.receivedAtIso : formatTime(corrected);
}

/**
 * Parsing and formatting dates is most of stamping's cost, and the messages
 * of a request, or of one second, often carry the same time stamp: the last
 * result of each is kept for the next call.
 */
let lastParsed: { text: string; ms: number | undefined } = { text: '', ms: undefined };
let lastFormatted: { ms: number; iso: string } = { ms: NaN, iso: '' };

function formatTime(ms: number): string {
  if (ms !== lastFormatted.ms) lastFormatted = { ms, iso: new Date(clampTime(ms)).toISOString() };
  return lastFormatted.iso;
}

const MAX_TIME_MS = 8_640_000_000_000_000;

/** A point in time, as epoch milliseconds and as the ISO-8601 string stored for it. */
export interface Instant {
  readonly ms: number;
  readonly iso: string;
}

/** Reads a client time stamp; undefined when it is not a date string. */
export function parseInstant(value: unknown): Instant | undefined {
  const ms = parseTime(value);
  return ms === undefined ? undefined : { ms, iso: formatTime(ms) };
}

function parseTime(value: unknown): number | undefined {
  if (typeof value !== 'string' || value.length > 64) return undefined;
  if (value !== lastParsed.text) {
    const ms = Date.parse(value);
    lastParsed = { text: value, ms: Number.isFinite(ms) ? ms : undefined };
  }
  return lastParsed.ms;
}

function clampTime(ms: number): number {
  return Math.max(-MAX_TIME_MS, Math.min(MAX_TIME_MS, ms));
}

function wantsRequestIp(context: JsonObject): boolean {
  if (context['direct'] === true) return true;
  const library = context['library'];
  return isJsonObject(library) && typeof library['name'] === 'string' && BROWSER_LIBRARIES.has(library['name']);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return value === '' ? 'an empty string' : JSON.stringify(value.slice(0, 40));
  if (typeof value === 'object') return 'an object';
  return typeof value === 'undefined' ? 'nothing' : `a ${typeof value}`;
}

function summarize(value: unknown): unknown {
  return typeof value === 'string' ? value.slice(0, 200) : Array.isArray(value) ? '[array]' : value;
}
