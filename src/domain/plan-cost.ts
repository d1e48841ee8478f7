import { isJsonObject, LIMITS } from './message.js';

/**
 * What checking one message against a tracking plan's schema can cost at
 * worst, estimated when the plan is saved. A plan runs (ajv) on every
 * message of its source on the processing thread every source shares, and
 * ajv's cost grows with the schema times the message: `uniqueItems` compares
 * every pair of items, `patternProperties` tries every pattern on every key,
 * `allOf` of many `items` walks the array once per entry, and `$ref` can
 * apply one definition an exponential number of times (a recursive
 * definition applied twice per level, or a chain of definitions each
 * referring twice to the next).
 *
 * The estimate counts keyword applications for the largest message a
 * source accepts ({@link MESSAGE_BYTES}), never the messages actually sent:
 *
 * - Each schema is applied some number of times per message (`applications`)
 *   and to the same value at most `multiplicity` times (more than once only
 *   through `allOf`-like applicators reaching one schema twice through
 *   `$ref`). A schema under `items`, `additionalProperties`, … applies to at
 *   most {@link VALUES} values (a value takes at least 2 bytes) or
 *   {@link KEYS} keys; one under `properties/x` to at most one value per
 *   `"x":0,` that fits in a message.
 * - A schema costs one unit per keyword per application, plus one per name
 *   of `properties`, `required`, `enum`; a `pattern` or `format`
 *   {@link UNITS.pattern}; `patternProperties` that much per pattern per key
 *   of the object; `uniqueItems` one per item where ajv hashes the items
 *   (their `items` schema has a `type` that is not object or array) and
 *   otherwise one per pair of items and a lookup per value compared.
 *
 * Rules, so that the estimate is finite and says something:
 * - `$ref` only to a JSON pointer in the same schema (`#/definitions/x`),
 *   never in a cycle (a schema that refers to itself), and `$id` only at the
 *   schema's root; no `$dynamicRef` or `$recursiveRef`.
 * - `uniqueItems` on items ajv cannot hash needs `maxItems` of at most
 *   {@link UNIQUE_ITEMS_MAX_ITEMS}.
 *
 * Measured (a 32 KB message): a schema of 150,000 units that passes costs
 * ~2 ms; `allOf` of 9 `{"items": {"type": "string"}}` (147,000 units)
 * against 16,000 numbers, every check failing, ~45 ms.
 *
 * Pure; throws nothing: returns why a schema is refused, or its cost.
 */

/** The largest message the Tracking API accepts (a call, or an element of a batch). */
export const MESSAGE_BYTES = Math.max(LIMITS.callBytes, LIMITS.batchElementBytes);
/** The most values a message can hold: `0,` is 2 bytes. */
export const VALUES = Math.ceil(MESSAGE_BYTES / 2);
/** The most keys an object of a message can hold: `"a":0,` is 6 bytes. */
export const KEYS = Math.ceil(MESSAGE_BYTES / 6);
/** The most values an object can be: `{},` is 3 bytes. */
const OBJECTS = Math.ceil(MESSAGE_BYTES / 3);

/**
 * A unit is one keyword checked on one value, which may fail: with ajv's
 * `allErrors` a failure makes an error object, ~300 ns (a check that passes
 * is ~10 ns). Looking up a name of `properties` or comparing to one value
 * of `enum` cannot fail on its own and is a fraction of that.
 */
export const UNITS = Object.freeze({
  /** A regular expression test (`pattern`, `format`, a `patternProperties` key on a key). */
  pattern: 1,
  /** A name of `properties`, a value of `enum`, a value compared by `uniqueItems`' deep equality (~8 ns). */
  lookup: 0.02,
});

/** `uniqueItems` on items ajv compares pairwise (objects, arrays, untyped) needs `maxItems` at most this. */
export const UNIQUE_ITEMS_MAX_ITEMS = 50;

export type SchemaCost = { readonly refused: string; readonly keyword: string } | { readonly units: number; readonly costliest: string };

/** Keywords whose value is a schema applied to the same value. */
const IN_PLACE_ONE = ['not', 'if', 'then', 'else'];
const IN_PLACE_LIST = ['allOf', 'anyOf', 'oneOf'];
/** Keywords whose value is a schema applied to each item or key. */
const EACH_ITEM = ['additionalItems', 'contains', 'unevaluatedItems'];
const EACH_KEY = ['additionalProperties', 'unevaluatedProperties', 'propertyNames'];

interface Edge {
  readonly to: unknown;
  /**
   * At most this many applications per path in all (Infinity: no bound of
   * its own); `each`: applied to every item or key, not once per
   * application of the schema it is in.
   */
  readonly cap: number;
  readonly each?: boolean;
}

/**
 * The cost of one schema (the value of an event's `properties`, a `traits`,
 * or `common`), or why it is refused. Draft-07 and 2020-12 alike: `items`
 * as a list and `prefixItems` apply one schema per position.
 */
export function schemaCost(root: unknown): SchemaCost {
  const edges = new Map<object, Edge[]>();
  const order: object[] = [];
  // Depth-first from the root, without recursion (a schema may nest deep): finds cycles through $ref.
  const state = new Map<object, 'open' | 'done'>();
  if (typeof root !== 'object' || root === null) return { units: 1, costliest: 'schema' };
  const stack: { node: object; next: number; out: Edge[] }[] = [];
  const enter = (node: object): string | undefined => {
    const out = childrenOf(node, root);
    if (typeof out === 'string') return out;
    edges.set(node, out);
    state.set(node, 'open');
    stack.push({ node, next: 0, out });
    return undefined;
  };
  const refusedAtRoot = enter(root);
  if (refusedAtRoot !== undefined) return refusal(refusedAtRoot);
  while (stack.length > 0) {
    const top = stack.at(-1)!;
    if (top.next === top.out.length) {
      state.set(top.node, 'done');
      order.push(top.node);
      stack.pop();
      continue;
    }
    const child = top.out[top.next++]!.to;
    if (typeof child !== 'object' || child === null) continue;
    const seen = state.get(child);
    if (seen === 'open') return { refused: 'refers to itself (a $ref cycle): recursive schemas are not supported', keyword: '$ref' };
    if (seen === undefined) {
      const refused = enter(child);
      if (refused !== undefined) return refusal(refused);
    }
  }
  // Reverse post-order is a topological order: every schema after all that lead to it.
  const applications = new Map<object, number>([[root, 1]]);
  const multiplicity = new Map<object, number>([[root, 1]]);
  let units = 0;
  let costliest = 'schema';
  let costliestUnits = -1;
  for (let i = order.length - 1; i >= 0; i--) {
    const node = order[i]!;
    const apps = applications.get(node) ?? 0;
    const mult = multiplicity.get(node) ?? 0;
    if (apps === 0) continue;
    if (Array.isArray(node)) continue;
    const { total, keyword, refused } = ownCost(node as Record<string, unknown>, apps, mult);
    if (refused !== undefined) return { refused, keyword };
    units += total.value;
    if (total.worst > costliestUnits) {
      costliestUnits = total.worst;
      costliest = keyword;
    }
    for (const edge of edges.get(node) ?? []) {
      if (typeof edge.to !== 'object' || edge.to === null) continue;
      applications.set(edge.to, (applications.get(edge.to) ?? 0) + (edge.each === true ? mult * edge.cap : Math.min(apps, mult * edge.cap)));
      multiplicity.set(edge.to, (multiplicity.get(edge.to) ?? 0) + mult);
    }
  }
  return { units, costliest };
}

function refusal(reason: string): SchemaCost {
  const keyword = /\(keyword "([^"]+)"\)$/.exec(reason)?.[1] ?? '$ref';
  return { refused: reason.replace(/ \(keyword "[^"]+"\)$/, ''), keyword };
}

/** The schemas a schema applies, with how many applications each can have per application of it; or why it is refused. */
function childrenOf(node: object, root: object): Edge[] | string {
  const out: Edge[] = [];
  if (Array.isArray(node)) return out;
  const schema = node as Record<string, unknown>;
  for (const keyword of ['$dynamicRef', '$recursiveRef']) {
    if (keyword in schema) return `${keyword} is not supported (keyword "${keyword}")`;
  }
  if (node !== root && typeof schema['$id'] === 'string') return `$id is only supported at the root of a schema (keyword "$id")`;
  const ref = schema['$ref'];
  if (typeof ref === 'string') {
    if (!ref.startsWith('#') || (ref.length > 1 && ref[1] !== '/')) return `$ref "${ref.slice(0, 80)}": only a JSON pointer into the same schema (such as "#/definitions/name") is supported (keyword "$ref")`;
    const target = resolvePointer(root, ref);
    if (target !== undefined) out.push({ to: target, cap: Infinity });
  }
  for (const keyword of IN_PLACE_ONE) if (keyword in schema) out.push({ to: schema[keyword], cap: Infinity });
  for (const keyword of IN_PLACE_LIST) {
    const list = schema[keyword];
    if (Array.isArray(list)) for (const item of list) out.push({ to: item, cap: Infinity });
  }
  for (const keyword of ['dependentSchemas', 'dependencies']) {
    const map = schema[keyword];
    if (isJsonObject(map)) for (const value of Object.values(map)) if (!Array.isArray(value)) out.push({ to: value, cap: Infinity });
  }
  const properties = schema['properties'];
  if (isJsonObject(properties)) {
    // A value at key x takes at least `"x":0,` of the message.
    for (const [key, value] of Object.entries(properties)) out.push({ to: value, cap: Math.ceil(MESSAGE_BYTES / (Buffer.byteLength(key) + 5)) });
  }
  const items = schema['items'];
  if (Array.isArray(items)) for (const item of items) out.push({ to: item, cap: VALUES });
  else if (items !== undefined) out.push({ to: items, cap: VALUES, each: true });
  const prefixItems = schema['prefixItems'];
  if (Array.isArray(prefixItems)) for (const item of prefixItems) out.push({ to: item, cap: VALUES });
  for (const keyword of EACH_ITEM) if (keyword in schema) out.push({ to: schema[keyword], cap: VALUES, each: true });
  for (const keyword of EACH_KEY) if (keyword in schema) out.push({ to: schema[keyword], cap: KEYS, each: true });
  const patternProperties = schema['patternProperties'];
  if (isJsonObject(patternProperties)) for (const value of Object.values(patternProperties)) out.push({ to: value, cap: KEYS, each: true });
  return out;
}

/** `#` or `#/a/b` (RFC 6901 in a URI fragment); undefined when it leads nowhere (ajv then refuses the schema). */
function resolvePointer(root: unknown, ref: string): unknown {
  let node: unknown = root;
  if (ref === '#' || ref === '#/') return ref === '#' ? root : isJsonObject(root) ? root[''] : undefined;
  let segments: string[];
  try {
    segments = decodeURIComponent(ref.slice(2)).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  } catch {
    return undefined;
  }
  for (const segment of segments) {
    if (Array.isArray(node)) node = node[Number(segment)];
    else if (isJsonObject(node)) node = Object.hasOwn(node, segment) ? node[segment] : undefined;
    else return undefined;
  }
  return node;
}

/** What one schema costs over all its applications (its keywords, not the schemas it applies), and its costliest keyword. */
function ownCost(schema: Record<string, unknown>, apps: number, mult: number): { total: { value: number; worst: number }; keyword: string; refused?: string } {
  let value = 0;
  let worst = -1;
  let keyword = 'schema';
  const add = (name: string, units: number): void => {
    value += units;
    if (units > worst) {
      worst = units;
      keyword = name;
    }
  };
  // Keywords about objects run on objects only, keywords about arrays on arrays: at most OBJECTS of either.
  const containers = Math.min(apps, mult * OBJECTS);
  for (const [name, v] of Object.entries(schema)) {
    switch (name) {
      case 'properties':
        add(name, containers * (1 + (isJsonObject(v) ? Object.keys(v).length : 0) * UNITS.lookup));
        break;
      case 'required':
        add(name, containers * (1 + (Array.isArray(v) ? v.length : 0)));
        break;
      case 'enum':
        add(name, apps * (1 + (Array.isArray(v) ? v.length : 0) * UNITS.lookup));
        break;
      case 'dependentRequired':
      case 'dependencies':
        add(name, containers * (1 + (isJsonObject(v) ? Object.values(v).reduce<number>((n, list) => n + (Array.isArray(list) ? list.length : 1), 0) : 0)));
        break;
      case 'pattern':
      case 'format':
        add(name, apps * (1 + UNITS.pattern));
        break;
      case 'patternProperties': {
        // Every key of every object it applies to, tried on every pattern (and again by additionalProperties beside it).
        const patterns = isJsonObject(v) ? Object.keys(v).length : 0;
        const again = schema['additionalProperties'] !== undefined || schema['unevaluatedProperties'] !== undefined ? 2 : 1;
        add(name, containers + mult * KEYS * patterns * UNITS.pattern * again);
        break;
      }
      case 'additionalProperties':
      case 'unevaluatedProperties':
      case 'propertyNames':
        add(name, containers + mult * KEYS);
        break;
      case 'uniqueItems': {
        if (v !== true) {
          add(name, apps);
          break;
        }
        if (hashesItems(schema['items'])) {
          add(name, containers + mult * VALUES * 2);
          break;
        }
        const maxItems = typeof schema['maxItems'] === 'number' ? schema['maxItems'] : Infinity;
        if (!(maxItems <= UNIQUE_ITEMS_MAX_ITEMS)) {
          return {
            total: { value, worst },
            keyword: name,
            refused: `uniqueItems compares every pair of items unless "items" has a "type" that is not object or array (then ajv hashes them): give it such an "items" or "maxItems" of at most ${UNIQUE_ITEMS_MAX_ITEMS}`,
          };
        }
        // Pairs of items, each compared (deep equality, a lookup per value) up to the smaller one's size: at most maxItems times the message.
        add(name, containers + (mult * maxItems * (maxItems - 1)) / 2 + mult * maxItems * VALUES * UNITS.lookup);
        break;
      }
      default:
        add(name, apps);
    }
  }
  if (worst < 0) add('schema', apps);
  return { total: { value, worst }, keyword };
}

/** Whether ajv checks `uniqueItems` by hashing: its `items` is one schema with a `type` that is neither object nor array (ajv's `canOptimize`). */
function hashesItems(items: unknown): boolean {
  if (!isJsonObject(items)) return false;
  const type = items['type'];
  const types = typeof type === 'string' ? [type] : Array.isArray(type) ? type : [];
  return types.length > 0 && types.every((t) => typeof t === 'string' && t !== 'object' && t !== 'array');
}
