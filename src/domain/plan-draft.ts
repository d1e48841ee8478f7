import type { JsonObject } from './message.js';
import { type JsonTypeName, type ObservedSchemaView, splitPath } from './observed-schema.js';

/**
 * A tracking plan drafted from a source's observed schema
 * (`POST /sources/:id/tracking-plan/from-schema`), for the user to edit and
 * PUT: one draft-07 schema per track event, and for identify and group
 * traits, with every path observed and the types seen there. A top-level
 * property seen in every message of its event is `required`; objects whose
 * members were all recorded say `additionalProperties: false`, so a new
 * property is reported (`Additional-Properties`) once the plan is on. The
 * controls flag and never block: a draft should be watched before it is
 * trusted. Pure: no I/O.
 */
export function draftPlan(observed: ObservedSchemaView, name: string): JsonObject {
  const events: JsonObject = {};
  const plan: JsonObject = { name, events };
  for (const e of observed.events) {
    const complete = !e.pathsTruncated;
    // defineProperty: an event named `__proto__` is a key like any other, not the object's prototype.
    if (e.type === 'track' && e.event !== null) Object.defineProperty(events, e.event, { value: { properties: schemaOfPaths(e.paths, e.count, complete) }, enumerable: true, writable: true, configurable: true });
    else if ((e.type === 'identify' || e.type === 'group') && plan[e.type] === undefined) plan[e.type] = { traits: schemaOfPaths(e.paths, e.count, complete) };
  }
  plan['controls'] = { unplannedEvents: 'flag', violations: 'flag', unplannedProperties: 'allow' };
  return plan;
}

interface PathNode {
  types: Set<JsonTypeName>;
  count: number;
  readonly children: Map<string, PathNode>;
  items: PathNode | undefined;
}

const newNode = (): PathNode => ({ types: new Set(), count: 0, children: new Map(), items: undefined });

function schemaOfPaths(paths: ReadonlyArray<{ path: string; types: readonly JsonTypeName[]; count: number }>, messages: number, complete: boolean): JsonObject {
  const root = newNode();
  root.types.add('object');
  root.count = messages;
  for (const p of paths) {
    let node = root;
    for (const segment of splitPath(p.path)) {
      if (segment === '[]') node = node.items ??= newNode();
      else {
        let child = node.children.get(segment);
        if (child === undefined) node.children.set(segment, (child = newNode()));
        node = child;
      }
    }
    for (const type of p.types) node.types.add(type);
    node.count = p.count;
  }
  return schemaOf(root, complete, true);
}

function schemaOf(node: PathNode, complete: boolean, top: boolean): JsonObject {
  const schema: JsonObject = {};
  // JSON does not tell 30 from 30.0 (many clients send a whole price as 30), so a number seen only whole is drafted as
  // `number`: `integer` would flag the first 29.99. Narrow it by hand where a count must be whole.
  const types = [...new Set([...node.types].map((t) => (t === 'integer' ? 'number' : t)))];
  if (types.length === 1) schema['type'] = types[0]!;
  else if (types.length > 1) schema['type'] = types;
  if (node.types.has('object') && node.children.size > 0) {
    const properties: JsonObject = {};
    for (const [key, child] of node.children) properties[key] = schemaOf(child, complete, false);
    schema['properties'] = properties;
    // Counts are per message, so only at the top do they say "in every one".
    if (top) {
      const required = [...node.children].filter(([, child]) => child.count >= node.count).map(([key]) => key);
      if (required.length > 0) schema['required'] = required;
    }
    if (complete) schema['additionalProperties'] = false;
  } else if (top) {
    schema['type'] = 'object';
    if (complete) schema['additionalProperties'] = false;
  }
  if (node.types.has('array') && node.items !== undefined) schema['items'] = schemaOf(node.items, complete, false);
  return schema;
}
