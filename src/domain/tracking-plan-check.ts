import type { ErrorObject } from 'ajv';
import { type CallType, isJsonObject, type JsonObject } from './message.js';
import { type CompiledPlan, type CompiledSchema, PLAN_BOUNDS } from './tracking-plan.js';

/** RudderStack's violation types. */
export type ViolationType = 'Unplanned-Event' | 'Required-Missing' | 'Datatype-Mismatch' | 'Additional-Properties' | 'Advance-Rules-Violation' | 'Unknown-Violation';

/** One violation, in RudderStack's shape (`context.violationErrors[]`). */
export interface Violation {
  readonly type: ViolationType;
  readonly message: string;
  readonly property?: string;
  readonly meta: { readonly instancePath: string; readonly schemaPath: string };
}

/**
 * What a plan made of a message: `pass` (nothing to report, or only what the
 * controls allow), `flag` (the body now carries the violations in its
 * context; with `omit` it also lost the violating properties) or `block`.
 */
export interface PlanVerdict {
  readonly action: 'pass' | 'flag' | 'block';
  /** The first {@link PLAN_BOUNDS.violationsPerMessage}, allowed ones included. */
  readonly violations: readonly Violation[];
}

const PASS: PlanVerdict = { action: 'pass', violations: [] };

/** Keywords whose failure is a rule beyond type and presence (RudderStack's Advance-Rules-Violation). */
const ADVANCED = new Set([
  'enum', 'const', 'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minLength', 'maxLength', 'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties', 'contains',
  'minContains', 'maxContains', 'dependencies', 'dependentRequired', 'propertyNames',
]);

/**
 * Applies a compiled plan to a message about to be stored, in place: with
 * `omit` its violating (and, with `unplannedProperties: omit`, unplanned)
 * properties or traits are deleted; with `flag` or `omit` and a violation,
 * its context gains `trackingPlanId`, `trackingPlanVersion` and
 * `violationErrors`. Per message: one validator call per schema that applies
 * (compiled once per plan version), nothing else unless something is wrong.
 */
export function checkAgainstPlan(plan: CompiledPlan, message: JsonObject, type: CallType): PlanVerdict {
  const { controls } = plan;
  const violations: Violation[] = [];
  let block = false;
  let report = false;
  let target: { schema: CompiledSchema; at: 'properties' | 'traits' } | undefined;
  if (type === 'track') {
    const event = typeof message['event'] === 'string' ? message['event'] : '';
    const schema = plan.events.get(event);
    if (schema === undefined) {
      if (controls.unplannedEvents !== 'allow') {
        violations.push({ type: 'Unplanned-Event', message: `event "${event.slice(0, 200)}" is not in the tracking plan`, meta: { instancePath: '/event', schemaPath: '#/events' } });
        if (controls.unplannedEvents === 'block') block = true;
        else report = true;
      }
    } else target = { schema, at: 'properties' };
  } else if (type === 'identify' && plan.identify !== undefined) target = { schema: plan.identify, at: 'traits' };
  else if (type === 'group' && plan.group !== undefined) target = { schema: plan.group, at: 'traits' };

  // Where violations are, to delete them: only gathered for omit (ajv may report thousands of errors).
  const omit = controls.violations === 'omit' ? { paths: [] as string[][], seen: new Set<string>() } : undefined;
  if (target !== undefined) {
    const value = message[target.at] ?? {};
    const { known } = target.schema;
    if (controls.unplannedProperties === 'omit' && known !== undefined && isJsonObject(value)) {
      for (const key of Object.keys(value)) if (!known.has(key)) delete value[key];
    }
    if (!validates(target.schema.validate, value, `/${target.at}`, violations)) collect(target.schema.validate.errors, `/${target.at}`, violations, omit);
  }
  if (plan.common !== undefined && !validates(plan.common.validate, message, '', violations)) collect(plan.common.validate.errors, '', violations, omit);
  const schemaViolations = violations.length > 0 && violations.at(-1)!.type !== 'Unplanned-Event';
  if (schemaViolations && controls.violations !== 'allow') {
    if (controls.violations === 'block') block = true;
    else report = true;
    if (omit !== undefined) for (const path of omit.paths) deleteAt(message, path);
  }
  if (violations.length === 0) return PASS;
  const shown = violations.slice(0, PLAN_BOUNDS.violationsPerMessage);
  if (!block && !report) return { action: 'pass', violations: shown };
  const existing = message['context'];
  const context: JsonObject = isJsonObject(existing) ? existing : {};
  message['context'] = context;
  context['trackingPlanId'] = plan.id;
  context['trackingPlanVersion'] = plan.version;
  context['violationErrors'] = shown;
  return { action: block ? 'block' : 'flag', violations: shown };
}

/**
 * Runs one compiled schema. A schema can throw on some values although it
 * compiled (a `$ref` cycle that recurses without consuming anything
 * overflows the stack): the message then counts as violating, on its own,
 * instead of the error failing every message processed with it.
 */
function validates(validate: CompiledSchema['validate'], value: unknown, at: string, violations: Violation[]): boolean {
  try {
    return validate(value);
  } catch (error) {
    violations.push({ type: 'Unknown-Violation', message: `the plan could not check this message: ${String((error as Error).message ?? error).slice(0, 200)}`, meta: { instancePath: at, schemaPath: '#' } });
    return true; // nothing more to collect: ajv's errors belong to an earlier call
  }
}

/**
 * ajv's errors as violations (prefixing where in the message the schema
 * applied), and, for omit, the paths to delete. ajv reports every error
 * (thousands for an array of wrong items): past the first
 * {@link PLAN_BOUNDS.violationsPerMessage} only an error at a new path is
 * looked at, and only for omit.
 */
function collect(errors: readonly ErrorObject[] | null | undefined, prefix: string, into: Violation[], omit: { paths: string[][]; seen: Set<string> } | undefined): void {
  for (const error of errors ?? []) {
    const shown = into.length < PLAN_BOUNDS.violationsPerMessage;
    if (!shown && omit === undefined) return;
    const instancePath = prefix + error.instancePath;
    const params = error.params as Record<string, unknown>;
    const additional = error.keyword === 'additionalProperties' || error.keyword === 'unevaluatedProperties';
    const additionalProperty = additional ? String(params['additionalProperty'] ?? params['unevaluatedProperty']) : undefined;
    // The same place again (another keyword, another branch): nothing new to delete.
    const place = additionalProperty === undefined ? instancePath : `${instancePath}\u0000${additionalProperty}`;
    if (!shown && (error.keyword === 'required' || omit!.seen.has(place))) continue;
    let type: ViolationType;
    let property: string | undefined;
    let path: string[] | undefined;
    if (error.keyword === 'required') {
      type = 'Required-Missing';
      property = String(params['missingProperty']);
    } else if (additionalProperty !== undefined) {
      type = 'Additional-Properties';
      property = additionalProperty;
      path = [...pointer(instancePath), property];
    } else {
      type = error.keyword === 'type' ? 'Datatype-Mismatch' : ADVANCED.has(error.keyword) ? 'Advance-Rules-Violation' : 'Unknown-Violation';
      path = pointer(instancePath);
      property = path.at(-1);
    }
    // Only what a plan is about goes: properties and traits, never the message's own fields.
    if (omit !== undefined && path !== undefined && !omit.seen.has(place) && path.length > 1 && (path[0] === 'properties' || path[0] === 'traits')) {
      omit.seen.add(place);
      omit.paths.push(path);
    }
    if (shown) {
      const message = property !== undefined && error.keyword !== 'required' ? `${property} ${error.message ?? 'is invalid'}` : (error.message ?? 'is invalid');
      into.push(property === undefined ? { type, message, meta: { instancePath, schemaPath: error.schemaPath } } : { type, message, property, meta: { instancePath, schemaPath: error.schemaPath } });
    }
  }
}

function pointer(path: string): string[] {
  if (path === '') return [];
  const segments = path.slice(1).split('/');
  return path.includes('~') ? segments.map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')) : segments;
}

/** Deletes the value at `path`: the key in its object, or (in an array) the nearest enclosing object key. */
function deleteAt(message: JsonObject, path: readonly string[]): void {
  let node: unknown = message;
  const owners: { obj: JsonObject; key: string }[] = [];
  for (const segment of path) {
    if (isJsonObject(node)) {
      owners.push({ obj: node, key: segment });
      node = node[segment];
    } else if (Array.isArray(node)) node = node[Number(segment)];
    else return;
  }
  // The deepest object member on the path; never the top-level `properties`/`traits` themselves.
  const owner = owners.length > 1 ? owners.at(-1) : undefined;
  if (owner !== undefined) delete owner.obj[owner.key];
}
