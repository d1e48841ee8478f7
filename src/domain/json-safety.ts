import type { JsonObject } from './message.js';

/**
 * Walks a parsed JSON value without recursion, removing every own `__proto__`
 * key (so no consumer that copies with `Object.assign` or a naive deep merge
 * can have its prototype replaced), and reports whether the value nests deeper
 * than `maxDepth` (an object or array directly in the root is depth 1).
 *
 * Stops walking, and reports `tooDeep`, at the first value past the limit.
 */
export function sanitizeJson(root: unknown, maxDepth: number): { tooDeep: boolean } {
  const stack: Array<{ value: unknown; depth: number }> = [{ value: root, depth: 0 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > maxDepth) return { tooDeep: true };
    if (Array.isArray(value)) {
      for (const item of value) stack.push({ value: item, depth: depth + 1 });
      continue;
    }
    const object = value as JsonObject;
    if (Object.prototype.hasOwnProperty.call(object, '__proto__')) {
      delete object['__proto__'];
    }
    for (const key in object) stack.push({ value: object[key], depth: depth + 1 });
  }
  return { tooDeep: false };
}
