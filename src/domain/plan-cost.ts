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
 * The estimate bounds keyword checks ("units") for the largest message a
 * source accepts ({@link MESSAGE_BYTES}), never the messages actually sent.
 * Every unit is spent on one value (or key) of the message, and a message
 * holds at most {@link VALUES} values and {@link KEYS} keys of objects, so:
 *
 * - A value reached from the schema's root through `properties` only is one
 *   value of the message: what every schema that applies to it costs there
 *   is summed (a wide object costs its width once, not per sibling).
 * - Any other value (under `items`, `patternProperties`,
 *   `additionalProperties`, … or below one) may be one of many: the most
 *   one such value can cost, times {@link VALUES}. Schemas under sibling
 *   names of `properties` never apply to the same value, so they do not add
 *   up; every schema applied in place (`allOf`, `anyOf`, `oneOf`, `not`,
 *   `if`/`then`/`else`, `$ref`, `dependentSchemas`) does, once per way it is
 *   reached (a definition `$ref`'d twice per level counts 2^depth), as do
 *   every `patternProperties` pattern, `additionalProperties` and the name
 *   of `properties` that can apply to one value.
 * - The most one key can cost (each `patternProperties` pattern tried on it,
 *   twice beside `additionalProperties`; the `additionalProperties` lookup;
 *   `propertyNames`), times {@link KEYS}.
 * - A keyword costs one unit per value it applies to; `required` one more
 *   per name; a name of `properties` or a value of `enum`
 *   {@link UNITS.lookup}; `pattern` and `format` {@link UNITS.pattern} more;
 *   annotations (`title`, `description`, `definitions`, …) nothing.
 *   `uniqueItems` costs two per item where ajv hashes the items, and
 *   otherwise a deep comparison per pair: each value below the array is read
 *   at most `maxItems` - 1 times.
 *
 * Rules, so that the estimate is finite and says something:
 * - `$ref` only to a JSON pointer in the same schema (`#/definitions/x`),
 *   never in a cycle (a schema that refers to itself), and `$id` only at the
 *   schema's root; no `$dynamicRef` or `$recursiveRef`.
 * - `uniqueItems` on items ajv cannot hash needs `maxItems` of at most
 *   {@link UNIQUE_ITEMS_MAX_ITEMS}.
 *
 * Measured (a 32 KB message, tracking-plan.ts's ajv options): at 250,000
 * units (`PLAN_BOUNDS.checkUnits`) the worst was ~55 ms with every check
 * failing (`allOf` of 15 `{"items": {"type": "string"}}` against an
 * array of 16,000 numbers; `required` of 14 names on 10,000 empty
 * objects ~40 ms) and ~1.5 ms with every check passing. An ecommerce order
 * with a `products` array scores ~75,000 (~1.7 ms); `allOf` of 50 such
 * `items` 819,000 (~530 ms), 500 `patternProperties` 10.9 million (~510 ms).
 *
 * Pure; throws nothing: returns why a schema is refused, or its cost.
 */

/** The largest message the Tracking API accepts (a call, or an element of a batch). */
export const MESSAGE_BYTES = Math.max(LIMITS.callBytes, LIMITS.batchElementBytes);
/** The most values a message can hold: `0,` is 2 bytes. */
export const VALUES = Math.ceil(MESSAGE_BYTES / 2);
/** The most keys an object of a message can hold: `"a":0,` is 6 bytes. */
export const KEYS = Math.ceil(MESSAGE_BYTES / 6);

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
  const quadratic = refCallsUnderRepeats(order, edges);
  if (quadratic !== undefined) return { refused: quadratic, keyword: '$ref' };
  // Post-order: every schema after all it leads to, so each is computed from its children's bounds.
  const bounds = new Map<object, Bounds>();
  for (const node of order) {
    if (Array.isArray(node)) continue;
    const computed = boundsOf(node as Record<string, unknown>, (child) => (typeof child === 'object' && child !== null && !Array.isArray(child) ? bounds.get(child) : undefined) ?? leaf(child));
    if ('refused' in computed) return computed;
    bounds.set(node, computed);
  }
  // Values reached through properties only are each one value of the message; any other value may be one
  // of VALUES, each costing at most `repeated`; a key one of KEYS.
  const top = bounds.get(root)!;
  const parts: Part[] = [top.once, { value: VALUES * top.repeated.value, keyword: top.repeated.keyword }, { value: KEYS * anyKey(top).value, keyword: anyKey(top).keyword }];
  return { units: parts[0]!.value + parts[1]!.value + parts[2]!.value, costliest: max(parts).keyword };
}

/** A bound and the keyword most of it comes from. */
interface Part {
  readonly value: number;
  readonly keyword: string;
}

/**
 * Bounds of what one application of a schema costs, counting the schemas it
 * applies in place (`allOf`, `$ref`, …) once per way they are reached:
 * - `here`: on the value it is applied to (its own keywords);
 * - `once`: on that value and on every value below it reached through
 *   `properties` only (each of those is one value of the message: summed);
 * - `repeated`: on any one value below it that can be one of many (under
 *   `items`, `patternProperties`, `additionalProperties`, … or below such a
 *   value): the most any such value can cost;
 * - `below`: on any one value strictly below it, the most any can cost;
 * - `key` / `keyBelow`: on any one key of the object it is applied to, or
 *   of an object below it (`patternProperties` tried on the key,
 *   `propertyNames`, the `additionalProperties` membership test).
 * A value sits under one key, so siblings under `properties` do not add up;
 * every schema that can apply to the same value does.
 */
interface Bounds {
  readonly here: Part;
  readonly once: Part;
  readonly repeated: Part;
  readonly below: Part;
  readonly key: Part;
  readonly keyBelow: Part;
}

const NONE: Part = { value: 0, keyword: 'schema' };
const ZERO: Bounds = { here: NONE, once: NONE, repeated: NONE, below: NONE, key: NONE, keyBelow: NONE };

/** A boolean schema (or none): `false` fails every value it applies to. */
function leaf(schema: unknown): Bounds {
  if (schema !== false) return ZERO;
  const one: Part = { value: 1, keyword: 'false' };
  return { ...ZERO, here: one, once: one };
}

const sum = (keyword: string | undefined, parts: readonly Part[]): Part => {
  let value = 0;
  let best = NONE;
  for (const part of parts) {
    value += part.value;
    if (part.value > best.value) best = part;
  }
  // Several schemas adding up are named by the keyword that lists them (allOf, patternProperties).
  const several = parts.filter((p) => p.value > 0).length > 1;
  return { value, keyword: several && keyword !== undefined ? keyword : best.keyword };
};
const max = (parts: readonly Part[]): Part => parts.reduce((best, part) => (part.value > best.value ? part : best), NONE);
const plus = (part: Part, units: number, keyword: string): Part => (units > part.value ? { value: part.value + units, keyword } : { value: part.value + units, keyword: part.keyword });
/** At or below: the most one value can cost. */
const anyValue = (b: Bounds): Part => max([b.here, b.below]);
const anyKey = (b: Bounds): Part => max([b.key, b.keyBelow]);

/** The bounds of one schema object from its children's (`of`), or why it is refused. */
function boundsOf(schema: Record<string, unknown>, of: (child: unknown) => Bounds): Bounds | { refused: string; keyword: string } {
  const own = ownCost(schema);
  if (own.refused !== undefined) return { refused: own.refused, keyword: own.keyword };
  // Schemas applied to the same value, each reached once more per way.
  const inPlace: { keyword: string; bounds: Bounds }[] = [];
  const ref = schema['$ref'];
  if (typeof ref === 'string' && ref.startsWith('#')) {
    const target = resolvedRefs.get(schema);
    if (target !== undefined) inPlace.push({ keyword: '$ref', bounds: of(target) });
  }
  for (const keyword of IN_PLACE_ONE) if (keyword in schema) inPlace.push({ keyword, bounds: of(schema[keyword]) });
  for (const keyword of IN_PLACE_LIST) {
    const list = schema[keyword];
    if (Array.isArray(list)) for (const item of list) inPlace.push({ keyword, bounds: of(item) });
  }
  for (const keyword of ['dependentSchemas', 'dependencies']) {
    const map = schema[keyword];
    if (isJsonObject(map)) for (const value of Object.values(map)) if (!Array.isArray(value)) inPlace.push({ keyword, bounds: of(value) });
  }
  const inPlaceKeyword = inPlace.length > 0 ? inPlace[0]!.keyword : undefined;
  const listed = (pick: (b: Bounds) => Part): Part[] => inPlace.map(({ bounds }) => pick(bounds));

  // The values of an object: one per key of properties (each its own value), and those
  // patternProperties, additionalProperties, unevaluatedProperties apply to (any number; the
  // same value as a name of properties where a pattern matches it).
  const properties = isJsonObject(schema['properties']) ? Object.values(schema['properties']).map(of) : [];
  const patterns = isJsonObject(schema['patternProperties']) ? Object.values(schema['patternProperties']).map(of) : [];
  const others = ['additionalProperties', 'unevaluatedProperties'].filter((k) => k in schema).map((k) => ({ keyword: k, bounds: of(schema[k]) }));
  const manyOfObject = sum('patternProperties', [...patterns.map(anyValue), ...others.map(({ keyword, bounds }) => ({ ...anyValue(bounds), keyword: anyValue(bounds).value > 0 ? anyValue(bounds).keyword : keyword }))]);
  const propertyAt = max(properties.map(anyValue));
  const propertyRepeated = max(properties.map((b) => b.repeated));
  const objectRepeated = patterns.length > 0 ? sum('patternProperties', [manyOfObject, propertyRepeated]) : max([manyOfObject, propertyRepeated]);
  const objectBelow = patterns.length > 0 ? sum('patternProperties', [manyOfObject, propertyAt]) : max([manyOfObject, propertyAt]);
  const objectKeyBelow = sum('patternProperties', [max(properties.map(anyKey)), ...patterns.map(anyKey), ...others.map(({ bounds }) => anyKey(bounds))]);

  // The values of an array: every item may be one of many.
  const itemSchemas: Bounds[] = [];
  const items = schema['items'];
  if (Array.isArray(items)) itemSchemas.push(...items.map(of));
  else if (items !== undefined) itemSchemas.push(of(items));
  const prefixItems = schema['prefixItems'];
  const positions = Array.isArray(prefixItems) ? prefixItems.map(of) : [];
  const perItem = sum('items', [
    Array.isArray(items) ? max(itemSchemas.map(anyValue)) : max(itemSchemas.map(anyValue)),
    max(positions.map(anyValue)),
    ...EACH_ITEM.filter((k) => k in schema).map((k) => anyValue(of(schema[k]))),
  ]);
  const arrayBelow = own.perItem > 0 ? plus(perItem, own.perItem, 'uniqueItems') : perItem;
  const arrayKeyBelow = sum('items', [...itemSchemas.map(anyKey), ...positions.map(anyKey), ...EACH_ITEM.filter((k) => k in schema).map((k) => anyKey(of(schema[k])))]);

  const names = 'propertyNames' in schema ? of(schema['propertyNames']).here : NONE;
  return {
    here: sum(inPlaceKeyword, [own.here, ...listed((b) => b.here)]),
    once: sum(inPlaceKeyword, [own.here, ...listed((b) => b.once), ...properties.map((b) => b.once)]),
    repeated: sum(inPlaceKeyword, [max([objectRepeated, arrayBelow]), ...listed((b) => b.repeated)]),
    below: sum(inPlaceKeyword, [max([objectBelow, arrayBelow]), ...listed((b) => b.below)]),
    key: sum(inPlaceKeyword, [own.key, names.value > 0 ? { ...names, keyword: 'propertyNames' } : NONE, ...listed((b) => b.key)]),
    keyBelow: sum(inPlaceKeyword, [max([objectKeyBelow, arrayKeyBelow]), ...listed((b) => b.keyBelow)]),
  };
}

/**
 * Why the schema is refused when a `$ref` that ajv compiles as a call of its
 * own can run once per item or key, else undefined. ajv inlines a `$ref`
 * only when its target holds no `$ref`; a call's errors are appended to all
 * collected so far (a copy each time, with `allErrors`), so under `items`,
 * `additionalProperties`, `patternProperties`, … the check of one message
 * grows with the square of its failing items: a definition that refers to
 * another, under `items`, cost 122 ms for 16,000 failing items at 65,000
 * units, and 5.3 s three levels deep. `order`: post-order (targets first).
 */
function refCallsUnderRepeats(order: readonly object[], edges: ReadonlyMap<object, readonly Edge[]>): string | undefined {
  // Whether checking a value against the schema makes such a call, on the value or below it.
  const calls = new Map<object, boolean>();
  for (const node of order) {
    const target = resolvedRefs.get(node);
    let makes = target !== undefined && holdsRef(target);
    for (const edge of edges.get(node) ?? []) if (!makes && typeof edge.to === 'object' && edge.to !== null && calls.get(edge.to) === true) makes = true;
    calls.set(node, makes);
  }
  for (const node of order) {
    if (Array.isArray(node)) continue;
    for (const [keyword, child] of repeatedChildren(node as Record<string, unknown>)) {
      if (typeof child === 'object' && child !== null && calls.get(child) === true) {
        return `a $ref to a definition that itself holds a $ref, under "${keyword}": ajv then collects the errors of each item at a cost that grows with the square of the items; write the inner definition in place of its $ref`;
      }
    }
  }
  return undefined;
}

/** The schemas a schema applies to each of many items or keys, with their keyword. */
function repeatedChildren(schema: Record<string, unknown>): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  if (schema['items'] !== undefined && !Array.isArray(schema['items'])) out.push(['items', schema['items']]);
  for (const keyword of [...EACH_ITEM, ...EACH_KEY]) if (keyword in schema) out.push([keyword, schema[keyword]]);
  const patternProperties = schema['patternProperties'];
  if (isJsonObject(patternProperties)) for (const value of Object.values(patternProperties)) out.push(['patternProperties', value]);
  return out;
}

/** Whether a schema holds a `$ref` anywhere in it (ajv's test for not inlining a `$ref` to it); iterative: a schema may nest deep. */
function holdsRef(schema: unknown): boolean {
  if (typeof schema !== 'object' || schema === null) return false;
  const known = refHolders.get(schema);
  if (known !== undefined) return known;
  const holds = findsRef(schema);
  refHolders.set(schema, holds);
  return holds;
}

/** {@link holdsRef}'s answers, by schema (many `$ref`s may lead to one definition). */
const refHolders = new WeakMap<object, boolean>();

function findsRef(schema: object): boolean {
  const pending: unknown[] = [schema];
  while (pending.length > 0) {
    const next = pending.pop();
    if (Array.isArray(next)) pending.push(...(next as unknown[]));
    else if (isJsonObject(next)) {
      if ('$ref' in next) return true;
      pending.push(...Object.values(next));
    }
  }
  return false;
}

/** The schema each local `$ref` leads to, found while walking (a WeakMap: schemas are the caller's objects). */
const resolvedRefs = new WeakMap<object, unknown>();

function refusal(reason: string): SchemaCost {
  const keyword = /\(keyword "([^"]+)"\)$/.exec(reason)?.[1] ?? '$ref';
  return { refused: reason.replace(/ \(keyword "[^"]+"\)$/, ''), keyword };
}

/** The schemas a schema applies (to walk them and find $ref cycles); or why it is refused. */
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
    if (target !== undefined) {
      resolvedRefs.set(node, target);
      out.push({ to: target });
    }
  }
  for (const keyword of IN_PLACE_ONE) if (keyword in schema) out.push({ to: schema[keyword] });
  for (const keyword of IN_PLACE_LIST) {
    const list = schema[keyword];
    if (Array.isArray(list)) for (const item of list) out.push({ to: item });
  }
  for (const keyword of ['dependentSchemas', 'dependencies']) {
    const map = schema[keyword];
    if (isJsonObject(map)) for (const value of Object.values(map)) if (!Array.isArray(value)) out.push({ to: value });
  }
  const properties = schema['properties'];
  if (isJsonObject(properties)) for (const value of Object.values(properties)) out.push({ to: value });
  const items = schema['items'];
  if (Array.isArray(items)) for (const item of items) out.push({ to: item });
  else if (items !== undefined) out.push({ to: items });
  const prefixItems = schema['prefixItems'];
  if (Array.isArray(prefixItems)) for (const item of prefixItems) out.push({ to: item });
  for (const keyword of EACH_ITEM) if (keyword in schema) out.push({ to: schema[keyword] });
  for (const keyword of EACH_KEY) if (keyword in schema) out.push({ to: schema[keyword] });
  const patternProperties = schema['patternProperties'];
  if (isJsonObject(patternProperties)) for (const value of Object.values(patternProperties)) out.push({ to: value });
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

/** Keywords ajv does not check (annotations, and where definitions are kept). */
const FREE = new Set(['$schema', '$id', '$anchor', '$comment', '$defs', 'definitions', 'title', 'description', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'then', 'else']);

/**
 * What one schema's own keywords cost (not the schemas they apply): on the
 * value it is applied to (`here`), on each key of that value (`key`), on
 * each item (`perItem`: `uniqueItems`), and its costliest keyword; or why
 * it is refused.
 */
function ownCost(schema: Record<string, unknown>): { here: Part; key: Part; perItem: number; keyword: string; refused?: string } {
  let here = 0;
  let worst = NONE;
  let key = 0;
  let keyKeyword = 'schema';
  let perItem = 0;
  const add = (name: string, units: number): void => {
    here += units;
    if (units > worst.value) worst = { value: units, keyword: name };
  };
  const checksKeys = schema['additionalProperties'] !== undefined || schema['unevaluatedProperties'] !== undefined;
  for (const [name, v] of Object.entries(schema)) {
    if (FREE.has(name)) continue;
    switch (name) {
      case 'properties':
        add(name, 1 + (isJsonObject(v) ? Object.keys(v).length : 0) * UNITS.lookup);
        break;
      case 'required':
        add(name, 1 + (Array.isArray(v) ? v.length : 0));
        break;
      case 'enum':
        add(name, 1 + (Array.isArray(v) ? v.length : 0) * UNITS.lookup);
        break;
      case 'dependentRequired':
      case 'dependencies':
        add(name, 1 + (isJsonObject(v) ? Object.values(v).reduce<number>((n, list) => n + (Array.isArray(list) ? list.length : 1), 0) : 0));
        break;
      case 'pattern':
      case 'format':
        add(name, 1 + UNITS.pattern);
        break;
      case 'patternProperties': {
        // Every pattern tried on every key of the object (and again by additionalProperties beside it).
        const patterns = isJsonObject(v) ? Object.keys(v).length : 0;
        add(name, 1);
        key += patterns * UNITS.pattern * (checksKeys ? 2 : 1);
        keyKeyword = name;
        break;
      }
      case 'additionalProperties':
      case 'unevaluatedProperties':
        // Each key looked up among the names of properties.
        add(name, 1);
        key += 1;
        if (keyKeyword === 'schema') keyKeyword = name;
        break;
      case 'uniqueItems': {
        add(name, 1);
        if (v !== true) break;
        if (hashesItems(schema['items'])) {
          perItem = 2;
          break;
        }
        const maxItems = typeof schema['maxItems'] === 'number' ? schema['maxItems'] : Infinity;
        if (!(maxItems <= UNIQUE_ITEMS_MAX_ITEMS)) {
          return {
            here: NONE,
            key: NONE,
            perItem,
            keyword: name,
            refused: `uniqueItems compares every pair of items unless "items" has a "type" that is not object or array (then ajv hashes them): give it such an "items" or "maxItems" of at most ${UNIQUE_ITEMS_MAX_ITEMS}`,
          };
        }
        // Each item is in at most maxItems - 1 pairs, and deep equality reads every value below
        // it once per pair: a lookup per value per pair, counted on every value below the array.
        perItem = (maxItems - 1) * UNITS.lookup * 1.5;
        break;
      }
      default:
        add(name, 1);
    }
  }
  return { here: { value: here, keyword: worst.keyword }, key: { value: key, keyword: keyKeyword }, perItem, keyword: worst.keyword };
}

/** Whether ajv checks `uniqueItems` by hashing: its `items` is one schema with a `type` that is neither object nor array (ajv's `canOptimize`). */
function hashesItems(items: unknown): boolean {
  if (!isJsonObject(items)) return false;
  const type = items['type'];
  const types = typeof type === 'string' ? [type] : Array.isArray(type) ? type : [];
  return types.length > 0 && types.every((t) => typeof t === 'string' && t !== 'object' && t !== 'array');
}
