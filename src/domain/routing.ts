import { isJsonObject } from './message.js';

/** Destination names as used in a message's `integrations` (case sensitive). */
export const DESTINATION_NAMES = { webhooks: 'Webhooks' } as const;
export type DestinationKind = keyof typeof DESTINATION_NAMES;

/**
 * What one delivery goes to, as `deliveries.destination` stores it: the
 * source's Webhooks destination, or one of its function destinations
 * (`function:<id>`).
 */
export type FunctionTarget = `function:${string}`;
export type DeliveryTarget = DestinationKind | FunctionTarget;

const FUNCTION_PREFIX = 'function:';

export function functionTarget(functionId: string): FunctionTarget {
  return `${FUNCTION_PREFIX}${functionId}`;
}

/** The function destination's id of a delivery target, or undefined for the Webhooks destination. */
export function functionIdOf(target: string): string | undefined {
  return target.startsWith(FUNCTION_PREFIX) ? target.slice(FUNCTION_PREFIX.length) : undefined;
}

/**
 * Whether a message's `integrations` let it through to a destination.
 * A key naming the destination decides (`false` disables; `true` or a settings
 * object enables); otherwise `All: false` disables; otherwise it is enabled.
 */
export function isRoutedTo(integrations: unknown, destination: DestinationKind): boolean {
  return isRoutedToName(integrations, DESTINATION_NAMES[destination]);
}

/** {@link isRoutedTo} by the destination's integrations key (a function destination's name). */
export function isRoutedToName(integrations: unknown, name: string): boolean {
  if (!isJsonObject(integrations)) return true;
  const own = Object.prototype.hasOwnProperty.call(integrations, name) ? integrations[name] : undefined;
  if (own !== undefined && own !== null) return own !== false;
  return integrations['All'] !== false;
}
