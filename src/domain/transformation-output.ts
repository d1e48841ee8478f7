import { sanitizeJson } from './json-safety.js';
import { isJsonObject, LIMITS } from './message.js';

/** What a transformation made of one message. */
export type TransformOutcome =
  | { readonly kind: 'output'; readonly bodies: readonly string[] }
  | { readonly kind: 'dropped' }
  | { readonly kind: 'error'; readonly error: string };

/**
 * Reads a transformation's return value (already parsed from the isolate's
 * JSON text): `null`/`undefined`/`[]` drop the message; an object is the
 * message to deliver; an array delivers each element, in order. Anything
 * else, an element that is not an object, or a message whose compact JSON
 * is over `maxBytes` fails the message. Bodies are the compact JSON of each
 * object as returned (`__proto__` keys removed).
 */
export function readTransformOutput(value: unknown, maxBytes: number, maxOutputs: number): TransformOutcome {
  if (value === null || value === undefined) return { kind: 'dropped' };
  const items = Array.isArray(value) ? value : [value];
  if (items.length === 0) return { kind: 'dropped' };
  if (items.length > maxOutputs) return { kind: 'error', error: `returned ${items.length} messages, more than ${maxOutputs}` };
  const bodies: string[] = [];
  for (const [index, item] of items.entries()) {
    const where = Array.isArray(value) ? `element ${index} of the result` : 'the result';
    if (!isJsonObject(item)) return { kind: 'error', error: `${where} is not an object (${describeType(item)})` };
    if (sanitizeJson(item, LIMITS.nestingDepth).tooDeep) return { kind: 'error', error: `${where} nests deeper than ${LIMITS.nestingDepth} levels` };
    const body = JSON.stringify(item);
    if (Buffer.byteLength(body) > maxBytes) return { kind: 'error', error: `${where} is larger than ${maxBytes / 1024} KB` };
    bodies.push(body);
  }
  return { kind: 'output', bodies };
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
