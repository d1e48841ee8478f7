import { type JsonObject, isJsonObject } from './message.js';

/** The `version` Segment's Webhooks destination puts on every call (not on `delete`). */
export const WEBHOOK_PAYLOAD_VERSION = 1;

/** Properties of a page call that Segment fills from `context.page` when the call has none. */
const PAGE_PROPERTIES = ['path', 'referrer', 'title', 'url'] as const;

/**
 * The body POSTed to receivers for a stored message: compact JSON of the
 * message as stored, with the fields Segment's Webhooks destination always
 * sends (see the README, "Webhooks destination"). Undefined when the stored text is not a JSON
 * object (nothing sensible can be sent).
 *
 * The result is exactly `JSON.stringify` of a plain object parsed from JSON,
 * so a receiver that re-stringifies its parsed body (as Segment's
 * signature-checking example does) gets the same bytes back.
 */
export function webhookBody(stored: string): string | undefined {
  const spliced = splicedWebhookBody(stored);
  if (spliced !== undefined) return spliced;
  let message: unknown;
  try {
    message = JSON.parse(stored);
  } catch {
    return undefined;
  }
  if (!isJsonObject(message)) return undefined;
  return JSON.stringify(webhookPayload(message));
}

/** The payload object for one message; the input is not modified. */
export function webhookPayload(message: JsonObject): JsonObject {
  const { version: _clientVersion, ...rest } = message;
  if (rest['type'] === 'delete') {
    return { ...rest, userId: rest['userId'] ?? null };
  }
  // `version` first, as Segment sends it; a client's own `version` is replaced.
  const payload: JsonObject = { version: WEBHOOK_PAYLOAD_VERSION, ...rest };
  const orNull = (field: string): void => {
    payload[field] ??= null;
  };
  const orEmptyObject = (field: string): void => {
    if (!isJsonObject(payload[field])) payload[field] = {};
  };

  switch (payload['type']) {
    case 'alias':
      orNull('userId');
      orNull('previousId');
      payload['Previous ID'] = payload['previousId'];
      payload['User ID'] = payload['userId'];
      break;
    case 'page':
      orNull('userId');
      payload['properties'] = pageProperties(payload['properties'], payload['context']);
      break;
    case 'screen':
      orNull('userId');
      orNull('name');
      orEmptyObject('context');
      break;
    case 'identify':
      orNull('userId');
      orEmptyObject('traits');
      break;
    case 'track':
      orNull('userId');
      orNull('event');
      orEmptyObject('properties');
      break;
    case 'group':
      orNull('userId');
      orNull('groupId');
      orEmptyObject('traits');
      break;
    default:
      break;
  }
  return payload;
}

/** A page call's properties, with path/referrer/title/url taken from `context.page` where absent. */
function pageProperties(properties: unknown, context: unknown): JsonObject {
  const out: JsonObject = isJsonObject(properties) ? { ...properties } : {};
  const page = isJsonObject(context) && isJsonObject(context['page']) ? context['page'] : undefined;
  if (page === undefined) return out;
  for (const key of PAGE_PROPERTIES) {
    if ((out[key] === undefined || out[key] === null) && page[key] !== undefined && page[key] !== null) out[key] = page[key];
  }
  return out;
}

// --- the same body, spliced from the stored text ------------------------------------------

/**
 * The fields {@link webhookPayload} fills in, by type, for the types whose
 * payload is otherwise the message itself with `version` first: when every
 * one of them is already there (as the kind of value it must be), the
 * payload adds nothing and moves nothing. Other types go the long way.
 */
const KEPT_AS_IS: Readonly<Record<string, { readonly present: readonly string[]; readonly objects: readonly string[] }>> = {
  track: { present: ['userId', 'event'], objects: ['properties'] },
  identify: { present: ['userId'], objects: ['traits'] },
  group: { present: ['userId', 'groupId'], objects: ['traits'] },
  screen: { present: ['userId', 'name'], objects: ['context'] },
};

/**
 * Characters JSON.stringify would write escaped (control characters), or
 * that this scanner does not follow: UTF-16 surrogates, pairs included, to
 * keep it simple (such texts go the long way, never to a wrong answer).
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
const UNWRITTEN_CHARACTER = /[\u0000-\u001f\ud800-\udfff]/;
/**
 * An escape other than the seven JSON.stringify writes (`\u0041`, `\/`):
 * a backslash that ends an odd run of them, followed by anything else.
 */
const UNWRITTEN_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\[^"\\bfnrt]/;
/** Integers JSON.stringify writes as they are: no sign but `-`, no leading zero, well within double precision. */
const PLAIN_INTEGER = /^-?(?:0|[1-9]\d{0,14})$/;
const MAX_DEPTH = 64;

/** A top-level member of the stored message: where it starts (its key's quote), where its value starts and where it ends. */
interface Member {
  readonly start: number;
  readonly valueAt: number;
  readonly end: number;
}

/**
 * The webhook body built from the stored text itself, without parsing it
 * into objects and writing them out again (measured on a 700-byte track
 * call: 5.5 µs and some 40 short-lived objects the long way).
 *
 * Byte-for-byte the same as the long way, or undefined (then the caller
 * takes it). It applies only when `JSON.stringify(JSON.parse(stored))` would
 * give `stored` back, which this checks while scanning it: no whitespace
 * between tokens, strings and numbers written as JSON.stringify writes them,
 * no repeated key and no key that JavaScript orders before the others (an
 * all-digit one, or `__proto__`) in any object. What ingest stores is
 * JSON.stringify's output, so this holds for its messages. Then the payload
 * is the stored object with `version: 1` first and the client's `version`
 * (if any) left out, as long as the type's fields are all there.
 */
export function splicedWebhookBody(stored: string): string | undefined {
  if (stored.charCodeAt(0) !== 123 /* { */ || UNWRITTEN_CHARACTER.test(stored)) return undefined;
  if (stored.includes('\\') && UNWRITTEN_ESCAPE.test(stored)) return undefined;
  const members = new Map<string, Member>();
  const end = scanObject(stored, 0, 1, members);
  if (end !== stored.length || members.size === 0) return undefined;
  const type = members.get('type');
  if (type === undefined || stored.charCodeAt(type.valueAt) !== 34 /* " */) return undefined;
  const name = typeName(stored, type);
  const kept = Object.hasOwn(KEPT_AS_IS, name) ? KEPT_AS_IS[name] : undefined;
  if (kept === undefined) return undefined;
  for (const key of kept.present) if (!members.has(key)) return undefined;
  for (const key of kept.objects) {
    const member = members.get(key);
    if (member === undefined || stored.charCodeAt(member.valueAt) !== 123 /* { */) return undefined;
  }
  const version = members.get('version');
  if (version === undefined) return `{"version":${WEBHOOK_PAYLOAD_VERSION},${stored.slice(1)}`;
  // Left out with the comma after it, or before it when it is the last member (there are others: type at least).
  const rest = stored.charCodeAt(version.end) === 44 /* , */
    ? stored.slice(1, version.start) + stored.slice(version.end + 1)
    : stored.slice(1, version.start - 1) + stored.slice(version.end);
  return `{"version":${WEBHOOK_PAYLOAD_VERSION},${rest}`;
}

/** The raw text of a string member's value, without its quotes. */
function typeName(text: string, member: Member): string {
  return text.slice(member.valueAt + 1, member.end - 1);
}

/**
 * Scans the value at `at` as JSON.stringify would have written it; resolves
 * the index just past it, or -1 when it is not valid JSON or not written so.
 */
function scanValue(text: string, at: number, depth: number): number {
  const c = text.charCodeAt(at);
  if (c === 123 /* { */) return scanObject(text, at, depth + 1, undefined);
  if (c === 91 /* [ */) return scanArray(text, at, depth + 1);
  if (c === 34 /* " */) return scanString(text, at);
  if (c === 116 /* t */) return text.startsWith('true', at) ? at + 4 : -1;
  if (c === 102 /* f */) return text.startsWith('false', at) ? at + 5 : -1;
  if (c === 110 /* n */) return text.startsWith('null', at) ? at + 4 : -1;
  if (c === 45 /* - */ || (c >= 48 && c <= 57)) return scanNumber(text, at);
  return -1;
}

/** An object; at the top level (`members` given) each member is recorded by key. */
function scanObject(text: string, at: number, depth: number, members: Map<string, Member> | undefined): number {
  if (depth > MAX_DEPTH) return -1;
  let i = at + 1;
  if (text.charCodeAt(i) === 125 /* } */) return i + 1;
  let keys: string[] | Set<string> = [];
  for (;;) {
    const start = i;
    const keyEnd = scanString(text, i);
    if (keyEnd < 0 || text.charCodeAt(keyEnd) !== 58 /* : */) return -1;
    const key = text.slice(i + 1, keyEnd - 1);
    if (!isOrdinaryKey(key)) return -1;
    if (Array.isArray(keys)) {
      if (keys.includes(key)) return -1;
      keys.push(key);
      if (keys.length > 16) keys = new Set(keys);
    } else {
      if (keys.has(key)) return -1;
      keys.add(key);
    }
    const valueAt = keyEnd + 1;
    i = scanValue(text, valueAt, depth);
    if (i < 0) return -1;
    // Escapes are only the seven JSON.stringify writes, each one way: the raw key is the key.
    members?.set(key, { start, valueAt, end: i });
    const next = text.charCodeAt(i);
    if (next === 125 /* } */) return i + 1;
    if (next !== 44 /* , */) return -1;
    i++;
  }
}

function scanArray(text: string, at: number, depth: number): number {
  if (depth > MAX_DEPTH) return -1;
  let i = at + 1;
  if (text.charCodeAt(i) === 93 /* ] */) return i + 1;
  for (;;) {
    i = scanValue(text, i, depth);
    if (i < 0) return -1;
    const next = text.charCodeAt(i);
    if (next === 93 /* ] */) return i + 1;
    if (next !== 44 /* , */) return -1;
    i++;
  }
}

/** A string (its characters and escapes were checked beforehand): finds the closing quote. */
function scanString(text: string, at: number): number {
  if (text.charCodeAt(at) !== 34 /* " */) return -1;
  let from = at + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === 92 /* \ */) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** A number as JSON.stringify writes it: the shortest text that reads back as the same double. */
function scanNumber(text: string, at: number): number {
  let i = at;
  for (;;) {
    const c = text.charCodeAt(i);
    // Digits, `-`, `+`, `.`, `e`, `E`: what a JSON number is made of.
    if ((c >= 48 && c <= 57) || c === 45 || c === 43 || c === 46 || c === 101 || c === 69) i++;
    else break;
  }
  const token = text.slice(at, i);
  if (PLAIN_INTEGER.test(token)) return token === '-0' ? -1 : i;
  // Anything String() gives back unchanged is a valid JSON number written the one way (no NaN or Infinity here).
  return String(Number(token)) === token ? i : -1;
}

/** Keys that keep their place in a parsed object: not an array index (any all-digit key, to be safe), not `__proto__`. */
function isOrdinaryKey(key: string): boolean {
  if (key === '__proto__') return false;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 48 || c > 57) return true;
  }
  return key.length === 0;
}
