import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { isJsonObject, type JsonObject } from './message.js';
import { schemaCost } from './plan-cost.js';
import { keepsUnicode, unsafePattern } from './safe-pattern.js';

/**
 * Tracking plans (Segment Protocols, RudderStack tracking plans): JSON Schema
 * per event, for identify and group traits, and for the whole message, with
 * the controls that say what a message breaking it becomes. This module
 * checks a plan as saved and compiles it; `tracking-plan-check.ts` applies a
 * compiled plan to a message. Pure: no I/O.
 */

export const UNPLANNED_EVENTS = ['allow', 'flag', 'block'] as const;
export const VIOLATIONS = ['allow', 'flag', 'block', 'omit'] as const;
export const UNPLANNED_PROPERTIES = ['allow', 'omit'] as const;

export interface PlanControls {
  readonly unplannedEvents: (typeof UNPLANNED_EVENTS)[number];
  readonly violations: (typeof VIOLATIONS)[number];
  readonly unplannedProperties: (typeof UNPLANNED_PROPERTIES)[number];
}

/** A plan as saved (and stored): the user's definition with its controls filled in. */
export interface TrackingPlanDefinition {
  readonly name?: string;
  readonly events: { readonly [event: string]: { readonly properties?: JsonObject } };
  readonly identify?: { readonly traits?: JsonObject };
  readonly group?: { readonly traits?: JsonObject };
  readonly common?: JsonObject;
  readonly controls: PlanControls;
}

export const PLAN_BOUNDS = Object.freeze({
  /** Of the plan's JSON text. */
  bytes: 256 * 1024,
  events: 2_000,
  /** A plan whose schemas take longer than this to compile is refused at save. */
  compileMs: 2_000,
  /** Reported per message; the rest are dropped (the count says how many there were). */
  violationsPerMessage: 20,
  patternLength: 500,
  /**
   * `pattern`s and `patternProperties` keys in all. Each is compiled at save
   * (on the request's thread) and tried on every value it applies to: 8,000
   * took 15 s to compile, and 2,000 patternProperties ~0.4 s per message.
   */
  patterns: 500,
  /**
   * The most a message may cost to check, in the units of `plan-cost.ts`
   * (one keyword check of one value each), estimated at save for the largest
   * message a source accepts: the schema that applies to it (an event's,
   * identify or group traits) plus `common`. At this bound a 32 KB message
   * measured at most ~55 ms when every check fails, ~1.5 ms when it passes.
   */
  checkUnits: 250_000,
});

const DEFAULT_CONTROLS: PlanControls = { unplannedEvents: 'allow', violations: 'flag', unplannedProperties: 'allow' };

/** A plan refused at save; the admin answers it as `400 invalid_tracking_plan`. The message names the event and the keyword. */
export class TrackingPlanError extends Error {
  override readonly name = 'TrackingPlanError';
}

const invalid = (message: string): TrackingPlanError => new TrackingPlanError(message);

/**
 * Checks a plan as sent to the admin API (shape, controls, size, every
 * schema valid and compilable, no catastrophically backtracking pattern) and
 * returns it with its controls filled in. Throws {@link TrackingPlanError}
 * naming the event and the keyword.
 */
export function parseTrackingPlan(input: unknown): TrackingPlanDefinition {
  if (!isJsonObject(input)) throw invalid('a tracking plan is a JSON object');
  const bytes = Buffer.byteLength(JSON.stringify(input));
  if (bytes > PLAN_BOUNDS.bytes) throw invalid(`the plan is ${bytes} bytes, over the ${PLAN_BOUNDS.bytes / 1024} KB limit`);
  for (const key of Object.keys(input)) {
    if (!['name', 'events', 'identify', 'group', 'common', 'controls'].includes(key)) throw invalid(`unknown member "${key}" (keyword "${key}")`);
  }
  const name = input['name'];
  if (name !== undefined && (typeof name !== 'string' || name.length > 200)) throw invalid('"name" must be a string of at most 200 characters');
  const events = input['events'] ?? {};
  if (!isJsonObject(events)) throw invalid('"events" must be an object of event name to {"properties": schema}');
  if (Object.keys(events).length > PLAN_BOUNDS.events) throw invalid(`"events" lists more than ${PLAN_BOUNDS.events} events`);
  for (const [event, spec] of Object.entries(events)) {
    if (!isJsonObject(spec) || Object.keys(spec).some((k) => k !== 'properties')) throw invalid(`event "${event}": must be {"properties": schema}`);
  }
  for (const kind of ['identify', 'group'] as const) {
    const spec = input[kind];
    if (spec !== undefined && (!isJsonObject(spec) || Object.keys(spec).some((k) => k !== 'traits'))) throw invalid(`"${kind}" must be {"traits": schema}`);
  }
  const controls = parseControls(input['controls']);
  const patterns = countPatterns(input);
  if (patterns > PLAN_BOUNDS.patterns) throw invalid(`the plan has ${patterns} patterns (keywords "pattern" and "patternProperties"), over the ${PLAN_BOUNDS.patterns} a plan may have`);
  const plan = { ...input, events, controls } as TrackingPlanDefinition;
  const started = performance.now();
  const compiler = new PlanCompiler();
  for (const { label, schema } of planSchemas(plan)) {
    compileSchema(compiler, label, schema);
    refuseMisplacedProperty(label, schema);
  }
  const took = performance.now() - started;
  if (took > PLAN_BOUNDS.compileMs) throw invalid(`the plan's schemas took ${Math.round(took)} ms to compile, over ${PLAN_BOUNDS.compileMs} ms`);
  checkCost(plan);
  return plan;
}

/**
 * Refuses a plan whose check of one message could cost more than
 * {@link PLAN_BOUNDS.checkUnits} (see `plan-cost.ts`), or whose cost cannot
 * be bounded (a `$ref` cycle, `uniqueItems` without a bound), naming the
 * schema and its costliest keyword.
 */
function checkCost(plan: TrackingPlanDefinition): void {
  let common = 0;
  const costs: { label: string; units: number; costliest: string }[] = [];
  for (const { label, slot, schema } of planSchemas(plan)) {
    const cost = schemaCost(schema);
    if ('refused' in cost) throw invalid(`${label}: ${cost.refused} (keyword "${cost.keyword}")`);
    if (slot.kind === 'common') common = cost.units;
    costs.push({ label, units: cost.units, costliest: cost.costliest });
  }
  for (const { label, units, costliest } of costs) {
    const total = label === 'common' ? units : units + common;
    if (total > PLAN_BOUNDS.checkUnits) {
      const withCommon = label === 'common' || common === 0 ? '' : ` with common's ${Math.round(common)}`;
      throw invalid(
        `${label}: checking the largest message could cost ${Math.round(total)} units${withCommon}, over the ${PLAN_BOUNDS.checkUnits} a plan may cost; ` +
          `its costliest keyword is "${costliest}" (a schema under items, additionalProperties or patternProperties applies to every item or key; see "What a plan costs") (keyword "${costliest}")`,
      );
    }
  }
}

/** `pattern` strings and `patternProperties` keys anywhere in the plan; walked without recursion (a plan may nest deep). */
function countPatterns(input: JsonObject): number {
  let count = 0;
  const stack: unknown[] = [input];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) for (const item of node) stack.push(item);
    else if (isJsonObject(node)) {
      for (const [key, value] of Object.entries(node)) {
        if (key === 'pattern' && typeof value === 'string') count++;
        else if (key === 'patternProperties' && isJsonObject(value)) count += Object.keys(value).length;
        stack.push(value);
      }
    }
  }
  return count;
}

function parseControls(value: unknown): PlanControls {
  if (value === undefined) return DEFAULT_CONTROLS;
  if (!isJsonObject(value)) throw invalid('"controls" must be an object');
  const pick = <T extends string>(key: keyof PlanControls, allowed: readonly T[]): T => {
    const v = value[key] ?? DEFAULT_CONTROLS[key];
    if (!allowed.includes(v as T)) throw invalid(`controls.${key} must be one of ${allowed.join(', ')} (keyword "${key}")`);
    return v as T;
  };
  for (const key of Object.keys(value)) if (!(key in DEFAULT_CONTROLS)) throw invalid(`unknown control "${key}" (keyword "${key}")`);
  return { unplannedEvents: pick('unplannedEvents', UNPLANNED_EVENTS), violations: pick('violations', VIOLATIONS), unplannedProperties: pick('unplannedProperties', UNPLANNED_PROPERTIES) };
}

/** Where a schema sits in the plan, and which part of a message it validates. */
export type SchemaSlot = { readonly kind: 'event'; readonly event: string } | { readonly kind: 'identify' | 'group' | 'common' };

function* planSchemas(plan: TrackingPlanDefinition): Generator<{ label: string; slot: SchemaSlot; schema: unknown }> {
  for (const [event, spec] of Object.entries(plan.events)) {
    if (spec.properties !== undefined) yield { label: `event "${event}"`, slot: { kind: 'event', event }, schema: spec.properties };
  }
  if (plan.identify?.traits !== undefined) yield { label: 'identify traits', slot: { kind: 'identify' }, schema: plan.identify.traits };
  if (plan.group?.traits !== undefined) yield { label: 'group traits', slot: { kind: 'group' }, schema: plan.group.traits };
  if (plan.common !== undefined) yield { label: 'common', slot: { kind: 'common' }, schema: plan.common };
}

/**
 * The ajv instances of one plan, made on first use: draft-07 unless a
 * schema says 2020-12 in its `$schema`. One set per plan (version), not one
 * for the process: an instance keeps every schema it compiled, so a shared
 * one would grow with each plan version for the life of the process.
 */
class PlanCompiler {
  private draft07: Ajv | undefined;
  private draft2020: Ajv | undefined;

  for(schema: unknown): Ajv {
    const is2020 = isJsonObject(schema) && typeof schema['$schema'] === 'string' && schema['$schema'].includes('2020-12');
    if (is2020) return (this.draft2020 ??= withFormats(new Ajv2020(AJV_OPTIONS)));
    return (this.draft07 ??= withFormats(new Ajv(AJV_OPTIONS)));
  }
}

/**
 * How ajv makes a plan's `pattern` and `patternProperties` regular
 * expressions: without the `u` flag unless the pattern needs it
 * (`keepsUnicode`), so that V8 can run one that backtracks too much on its
 * linear-time engine, which takes no `u` (see `util/regexp-fallback.ts` and
 * `safe-pattern.ts`). Without `u`, `.` and `[^…]` match one UTF-16 unit, so
 * a character outside the BMP (an emoji) counts as two, as in JSON Schema
 * validators that run patterns without it.
 */
const planPattern = Object.assign((pattern: string, flags: string): RegExp => new RegExp(pattern, keepsUnicode(pattern) ? flags : flags.replace('u', '')), {
  code: 'switchyardPlanPattern',
});

// strict off: Segment plans carry annotations (`id`, `labels`) ajv's strict mode refuses.
const AJV_OPTIONS = { allErrors: true, strict: false, validateSchema: true, addUsedSchema: false, code: { regExp: planPattern } } as const;

function withFormats(ajv: Ajv): Ajv {
  addFormats(ajv, { mode: 'fast' });
  // ajv throws on `id` ("use $id"), strict or not; in a plan it is an annotation (Segment's rules carry one), as the docs say.
  ajv.removeKeyword('id');
  return ajv;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv, options: { mode: 'fast' | 'full' }) => Ajv;

function compileSchema(compiler: PlanCompiler, label: string, schema: unknown): ValidateFunction {
  if (typeof schema !== 'boolean' && !isJsonObject(schema)) throw invalid(`${label}: a schema must be an object or a boolean`);
  const pattern = findUnsafePattern(schema, '#');
  if (pattern !== undefined) throw invalid(`${label}: pattern at ${pattern.at} ${pattern.why} (keyword "pattern")`);
  const ajv = compiler.for(schema);
  if (!ajv.validateSchema(schema)) {
    const first = ajv.errors?.[0];
    const at = first === undefined ? '' : ` at ${first.instancePath === '' ? '/' : first.instancePath}`;
    throw invalid(`${label}: not a valid JSON Schema${at}: ${first?.message ?? 'invalid'} (keyword "${keywordOf(first)}")`);
  }
  try {
    return ajv.compile(schema);
  } catch (error) {
    throw new TrackingPlanError(`${label}: ${(error as Error).message.slice(0, 300)} (keyword "${/keyword "?(\w+)/.exec((error as Error).message)?.[1] ?? '$ref'}")`, { cause: error });
  }
}

/** The schema keyword a meta-schema error is about: the last segment of its path in the schema. */
function keywordOf(error: ErrorObject | undefined): string {
  if (error === undefined) return 'schema';
  const segments = error.instancePath.split('/').filter((s) => s !== '' && !/^\d+$/.test(s));
  return segments.at(-1) ?? error.keyword;
}

function findUnsafePattern(schema: unknown, at: string): { at: string; why: string } | undefined {
  if (Array.isArray(schema)) {
    for (let i = 0; i < schema.length; i++) {
      const found = findUnsafePattern(schema[i], `${at}/${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!isJsonObject(schema)) return undefined;
  for (const [key, value] of Object.entries(schema)) {
    const patterns = key === 'pattern' && typeof value === 'string' ? [value] : key === 'patternProperties' && isJsonObject(value) ? Object.keys(value) : [];
    for (const pattern of patterns) {
      if (pattern.length > PLAN_BOUNDS.patternLength) return { at: `${at}/${key}`, why: `is longer than ${PLAN_BOUNDS.patternLength} characters` };
      const why = unsafePattern(pattern);
      if (why !== undefined) return { at: `${at}/${key}`, why };
    }
    const found = findUnsafePattern(value, `${at}/${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Refused at save only: a stored plan compiles as it was saved. */
function refuseMisplacedProperty(label: string, schema: unknown): void {
  const misplaced = findMisplacedProperty(schema, '');
  if (misplaced !== undefined) {
    throw invalid(
      `${label}: "${misplaced.key.slice(0, 100)}" at ${misplaced.at === '' ? '/' : misplaced.at} is not a JSON Schema keyword, so it would check nothing; ` +
        `a property's schema goes under "properties": {"type": "object", "properties": {${JSON.stringify(misplaced.key.slice(0, 100))}: …}} (keyword "${misplaced.key.slice(0, 100)}")`,
    );
  }
}

/** The JSON Schema keywords of draft-07 and 2020-12 (with the annotations), which ajv reads or allows. */
const KEYWORDS = new Set([
  '$schema', '$id', 'id', '$ref', '$comment', '$defs', 'definitions', '$anchor', '$dynamicRef', '$dynamicAnchor', '$recursiveRef', '$recursiveAnchor', '$vocabulary',
  'title', 'description', 'default', 'examples', 'readOnly', 'writeOnly', 'deprecated',
  'type', 'enum', 'const', 'multipleOf', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum', 'maxLength', 'minLength', 'pattern', 'format',
  'items', 'additionalItems', 'prefixItems', 'maxItems', 'minItems', 'uniqueItems', 'contains', 'maxContains', 'minContains', 'unevaluatedItems',
  'maxProperties', 'minProperties', 'required', 'properties', 'patternProperties', 'additionalProperties', 'unevaluatedProperties', 'propertyNames',
  'dependencies', 'dependentRequired', 'dependentSchemas', 'if', 'then', 'else', 'allOf', 'anyOf', 'oneOf', 'not',
  'contentEncoding', 'contentMediaType', 'contentSchema',
]);
/** Keywords whose value is a schema, a list of schemas, or an object of schemas. */
const SCHEMA_KEYWORDS = new Set(['items', 'additionalItems', 'additionalProperties', 'unevaluatedItems', 'unevaluatedProperties', 'contains', 'propertyNames', 'if', 'then', 'else', 'not', 'contentSchema', 'allOf', 'anyOf', 'oneOf', 'prefixItems']);
const SCHEMA_MAP_KEYWORDS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);
/** What only a schema holds: an unknown keyword whose value has one of these is a property written without "properties". */
const SCHEMA_MARKS = ['type', 'enum', 'const', 'properties', 'items', '$ref', 'format', 'pattern'];

/**
 * An unknown keyword whose value is itself a schema (`{"revenue": {"type":
 * "number"}}` in place of `{"properties": {"revenue": …}}`): ajv ignores
 * unknown keywords (plans carry annotations), so such a plan would save and
 * check nothing there. Walks the schema positions without recursion.
 */
function findMisplacedProperty(schema: unknown, root: string): { at: string; key: string } | undefined {
  const stack: { node: unknown; at: string }[] = [{ node: schema, at: root }];
  while (stack.length > 0) {
    const { node, at } = stack.pop()!;
    if (Array.isArray(node)) {
      node.forEach((item, i) => stack.push({ node: item, at: `${at}/${i}` }));
      continue;
    }
    if (!isJsonObject(node)) continue;
    for (const [key, value] of Object.entries(node)) {
      const path = `${at}/${key}`;
      if (SCHEMA_KEYWORDS.has(key)) stack.push({ node: value, at: path });
      else if (SCHEMA_MAP_KEYWORDS.has(key) && isJsonObject(value)) {
        for (const [name, sub] of Object.entries(value)) stack.push({ node: sub, at: `${path}/${name}` });
      } else if (!KEYWORDS.has(key) && isJsonObject(value) && SCHEMA_MARKS.some((mark) => Object.hasOwn(value, mark))) return { at: at, key };
    }
  }
  return undefined;
}

/** A plan ready to check messages: compiled once per plan version (see `SourceDirectory.trackingPlan`). */
export interface CompiledPlan {
  readonly id: string;
  readonly version: number;
  readonly controls: PlanControls;
  readonly events: ReadonlyMap<string, CompiledSchema>;
  readonly identify: CompiledSchema | undefined;
  readonly group: CompiledSchema | undefined;
  readonly common: CompiledSchema | undefined;
}

export interface CompiledSchema {
  readonly validate: ValidateFunction;
  /** The top-level `properties` the schema names (for `unplannedProperties: omit`); undefined: it names none, so nothing is unplanned. */
  readonly known: ReadonlySet<string> | undefined;
}

/** Compiles a stored plan (already checked by {@link parseTrackingPlan}). */
export function compileTrackingPlan(id: string, version: number, plan: TrackingPlanDefinition): CompiledPlan {
  const events = new Map<string, CompiledSchema>();
  let identify: CompiledSchema | undefined;
  let group: CompiledSchema | undefined;
  let common: CompiledSchema | undefined;
  const compiler = new PlanCompiler();
  for (const { label, slot, schema } of planSchemas(plan)) {
    const compiled: CompiledSchema = { validate: compileSchema(compiler, label, schema), known: knownProperties(schema) };
    if (slot.kind === 'event') events.set(slot.event, compiled);
    else if (slot.kind === 'identify') identify = compiled;
    else if (slot.kind === 'group') group = compiled;
    else common = compiled;
  }
  // An event listed without a schema is planned, with anything allowed.
  for (const event of Object.keys(plan.events)) if (!events.has(event)) events.set(event, ANYTHING);
  return { id, version, controls: plan.controls, events, identify, group, common };
}

const ANYTHING: CompiledSchema = { validate: Object.assign(() => true, { errors: null }) as unknown as ValidateFunction, known: undefined };

function knownProperties(schema: unknown): ReadonlySet<string> | undefined {
  if (!isJsonObject(schema) || !isJsonObject(schema['properties'])) return undefined;
  return new Set(Object.keys(schema['properties']));
}
