import type { EngageMessage } from '../domain/engage/index.js';
import { storedId } from '../domain/normalize.js';
import type { StoredMessage } from '../store/store.js';
import type { ParsedMessage } from './profile-set.js';
import { SYNC_REASON_PREFIX } from './sync-messages.js';

/** What Engage reads of a stored message: its Engage form and the identifiers that find its profile. */

const ENGAGE_TYPES = new Set(['identify', 'track', 'page', 'screen', 'group', 'alias']);

/** Accepted and filtered Tracking API messages of the Engage types; not Engage's own syncs, not suppressed ones. */
export function engageMessageOf(stored: StoredMessage): ParsedMessage | undefined {
  if (stored.status !== 'accepted' && stored.status !== 'filtered') return undefined;
  if (stored.type === undefined || !ENGAGE_TYPES.has(stored.type)) return undefined;
  if (stored.status === 'accepted' && stored.reason?.startsWith(SYNC_REASON_PREFIX) === true) return undefined;
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(stored.body) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const identifiers: string[] = [];
  const userId = idOf(body['userId']);
  const anonymousId = idOf(body['anonymousId']);
  if (userId !== undefined) identifiers.push(`user_id:${userId}`);
  if (anonymousId !== undefined) identifiers.push(`anonymous_id:${anonymousId}`);
  const previousId = stored.type === 'alias' ? idOf(body['previousId']) : undefined;
  const previous = previousId === undefined ? [] : [`user_id:${previousId}`, `anonymous_id:${previousId}`];
  if (identifiers.length === 0 && previous.length === 0) return undefined;
  const parsedTime = typeof body['timestamp'] === 'string' ? Date.parse(body['timestamp']) : Number.NaN;
  const engage: EngageMessage = {
    type: stored.type as EngageMessage['type'],
    ...(typeof body['event'] === 'string' ? { event: body['event'] } : {}),
    ...(isObject(body['properties']) ? { properties: body['properties'] } : {}),
    ...(isObject(body['traits']) ? { traits: body['traits'] } : {}),
    timestamp: Number.isFinite(parsedTime) ? parsedTime : stored.receivedAt,
  };
  return { engage, identifiers, previous };
}

/** `parsed`: the message as {@link engageMessageOf} read it, when it already did. */
export function identifiersOf(stored: StoredMessage, parsed = engageMessageOf(stored)): string[] {
  if (stored.type === 'delete' && stored.userId !== undefined) return [`user_id:${storedId(stored.userId)}`];
  return parsed === undefined ? [] : [...parsed.identifiers, ...parsed.previous];
}

/**
 * An id of a stored body, named as ingest stores ids (storedId): a body
 * stored before ingest replaced U+0000 may still hold one, which profiles'
 * identifiers (PostgreSQL text) refuse on every try.
 */
function idOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value.length > 0) return storedId(value);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
