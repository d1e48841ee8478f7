import { isJsonObject } from './message.js';

/** Destination names as used in a message's `integrations` (case sensitive). */
export const DESTINATION_NAMES = { webhooks: 'Webhooks' } as const;
export type DestinationKind = keyof typeof DESTINATION_NAMES;

/**
 * Whether a message's `integrations` let it through to a destination.
 * A key naming the destination decides (`false` disables; `true` or a settings
 * object enables); otherwise `All: false` disables; otherwise it is enabled.
 */
export function isRoutedTo(integrations: unknown, destination: DestinationKind): boolean {
  if (!isJsonObject(integrations)) return true;
  const own = integrations[DESTINATION_NAMES[destination]];
  if (own !== undefined && own !== null) return own !== false;
  return integrations['All'] !== false;
}
