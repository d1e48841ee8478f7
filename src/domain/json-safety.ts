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

/** What {@link jsonBoundsProblem} found, and where: the keys and indexes from the root. */
export interface JsonBoundsProblem {
  readonly path: ReadonlyArray<string | number>;
  readonly problem: 'too-deep' | 'not-finite';
}

/**
 * The first value of a parsed JSON document that no later step may be given,
 * found without recursion: one nested deeper than `maxDepth` (any recursive
 * walk of it, `JSON.stringify` included, would overflow the stack at some
 * 10,000 levels), or a number out of range (`1e400` parses to `Infinity`,
 * which JSON cannot hold: stored, it comes back as `null`).
 */
export function jsonBoundsProblem(root: unknown, maxDepth: number): JsonBoundsProblem | undefined {
  interface Entry {
    readonly value: unknown;
    readonly depth: number;
    readonly parent: Entry | undefined;
    readonly key: string | number | undefined;
  }
  const pathOf = (entry: Entry): Array<string | number> => {
    const path: Array<string | number> = [];
    for (let at: Entry | undefined = entry; at?.key !== undefined; at = at.parent) path.push(at.key);
    return path.reverse();
  };
  const stack: Entry[] = [{ value: root, depth: 0, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const entry = stack.pop()!;
    const { value, depth } = entry;
    if (typeof value === 'number' && !Number.isFinite(value)) return { path: pathOf(entry), problem: 'not-finite' };
    if (typeof value !== 'object' || value === null) continue;
    if (depth > maxDepth) return { path: pathOf(entry), problem: 'too-deep' };
    // Pushed in reverse, so the first problem in document order is found first.
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], depth: depth + 1, parent: entry, key: i });
      continue;
    }
    const keys = Object.keys(value);
    for (let i = keys.length - 1; i >= 0; i--) {
      stack.push({ value: (value as JsonObject)[keys[i]!], depth: depth + 1, parent: entry, key: keys[i]! });
    }
  }
  return undefined;
}
