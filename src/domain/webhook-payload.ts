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
