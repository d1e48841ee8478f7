import { OPERATORS, type Operator } from '../conditions.js';
import { isJsonObject } from '../message.js';
import { DefinitionError } from './errors.js';
import { parseWithin } from './windows.js';

export { DefinitionError } from './errors.js';

/**
 * The definition language of computed traits and audiences. Parsed
 * definitions keep the JSON shape users post (normalized: defaults filled in,
 * nothing unknown), so a parsed definition can be stored and parsed again.
 */

/** Which messages an event condition looks at: a track's event name, or every message of a type. */
export type EventSelector = string | { readonly type: 'track' | 'page' | 'screen' | 'identify' | 'group' };

/** `{"property": "revenue", "op": ">=", "value": 100}`: a property of the message (traits for identify and group). */
export interface PropertyCondition {
  readonly property: string;
  readonly op: Operator;
  readonly value?: unknown;
}

/** The part every event condition shares. `within` absent = all time. */
export interface WindowedEvent {
  readonly event: EventSelector;
  readonly where?: readonly PropertyCondition[];
  readonly within?: string;
}

export type ComputedTraitDefinition =
  | (WindowedEvent & { readonly type: 'event_counter' })
  | (WindowedEvent & { readonly type: 'aggregation'; readonly fn: 'sum' | 'avg' | 'min' | 'max'; readonly property: string })
  | (WindowedEvent & {
      readonly type: 'most_frequent' | 'first' | 'last' | 'unique_list' | 'unique_list_count';
      readonly property: string;
    });

export type CountOperator = '=' | '!=' | '>' | '>=' | '<' | '<=';

export type AudienceCondition =
  | { readonly performed: WindowedEvent & { readonly count: { readonly op: CountOperator; readonly value: number } } }
  | { readonly notPerformed: WindowedEvent }
  | { readonly trait: PropertyComparison }
  | { readonly computedTrait: PropertyComparison }
  | { readonly inAudience: string }
  | { readonly notInAudience: string }
  | { readonly and: readonly AudienceCondition[] }
  | { readonly or: readonly AudienceCondition[] }
  | { readonly not: AudienceCondition };

export interface PropertyComparison {
  readonly key: string;
  readonly op: Operator;
  readonly value?: unknown;
}

export type AudienceDefinition = AudienceCondition;

export const DEFINITION_LIMITS = Object.freeze({
  /** Levels of and/or/not. */
  depth: 8,
  /** Conditions in one and/or, and property conditions in one `where`. */
  listLength: 50,
  /** Conditions in one audience, all levels together. */
  conditions: 200,
  /** performed/notPerformed conditions in one audience (each keeps an accumulator per profile). */
  eventConditions: 20,
  /** Characters of an event name, a property path or a key. */
  nameLength: 200,
  /** Characters of a compared value, as JSON. */
  valueLength: 1_000,
  /** The largest `count.value` of `performed`. */
  count: 1_000_000,
});

const MESSAGE_TYPES = ['track', 'page', 'screen', 'identify', 'group'] as const;
const TRAIT_TYPES = ['event_counter', 'aggregation', 'most_frequent', 'first', 'last', 'unique_list', 'unique_list_count'] as const;
const AGGREGATIONS = ['sum', 'avg', 'min', 'max'] as const;
const COUNT_OPERATORS: readonly CountOperator[] = ['=', '!=', '>', '>=', '<', '<='];
/** A dotted path of plain keys: `product.sku`. */
const PATH = /^[^.\s]+(\.[^.\s]+)*$/;
/** What `key` may be: lower snake_case, as keyFromName makes it. */
const KEY = /^[a-z0-9][a-z0-9_]*$/;

/** Validates a posted computed-trait definition; returns it normalized. Paths start at `definition`. */
export function parseComputedTraitDefinition(json: unknown): ComputedTraitDefinition {
  const at = 'definition';
  if (!isJsonObject(json)) throw new DefinitionError(at, 'must be an object: {type, event, property?, where?, within?}');
  const type = json['type'];
  if (typeof type !== 'string' || !(TRAIT_TYPES as readonly string[]).includes(type)) {
    throw new DefinitionError(`${at}.type`, `must be one of ${TRAIT_TYPES.join(', ')}`);
  }
  const allowed = type === 'event_counter' ? ['type', 'event', 'where', 'within'] : type === 'aggregation' ? ['type', 'fn', 'event', 'property', 'where', 'within'] : ['type', 'event', 'property', 'where', 'within'];
  rejectUnknownFields(json, allowed, at);
  const base = parseWindowedEvent(json, at);
  if (type === 'event_counter') return { type, ...base };
  const property = parsePath(json['property'], `${at}.property`);
  if (type === 'aggregation') {
    const fn = json['fn'];
    if (typeof fn !== 'string' || !(AGGREGATIONS as readonly string[]).includes(fn)) {
      throw new DefinitionError(`${at}.fn`, `must be one of ${AGGREGATIONS.join(', ')}`);
    }
    return { type, fn: fn as (typeof AGGREGATIONS)[number], ...base, property };
  }
  return { type: type as 'most_frequent', ...base, property };
}

/** Validates a posted audience definition (a condition); returns it normalized. Paths start at `definition`. */
export function parseAudienceDefinition(json: unknown): AudienceDefinition {
  const budget = { conditions: 0, eventConditions: 0 };
  return parseAudienceCondition(json, 'definition', 0, budget);
}

function parseAudienceCondition(json: unknown, at: string, depth: number, budget: { conditions: number; eventConditions: number }): AudienceCondition {
  if (depth > DEFINITION_LIMITS.depth) throw new DefinitionError(at, `nests more than ${DEFINITION_LIMITS.depth} levels`);
  if (++budget.conditions > DEFINITION_LIMITS.conditions) throw new DefinitionError(at, `is one condition too many: an audience has at most ${DEFINITION_LIMITS.conditions}`);
  const keys = isJsonObject(json) ? Object.keys(json) : [];
  if (!isJsonObject(json) || keys.length !== 1) {
    throw new DefinitionError(at, 'must be an object with exactly one of performed, notPerformed, trait, computedTrait, inAudience, notInAudience, and, or, not');
  }
  const kind = keys[0]!;
  const body = json[kind];
  const inner = `${at}.${kind.slice(0, 60)}`;
  switch (kind) {
    case 'performed': {
      if (!isJsonObject(body)) throw new DefinitionError(inner, 'must be an object: {event, where?, within?, count?}');
      rejectUnknownFields(body, ['event', 'where', 'within', 'count'], inner);
      countEventCondition(budget, inner);
      return { performed: { ...parseWindowedEvent(body, inner), count: parseCount(body['count'], `${inner}.count`) } };
    }
    case 'notPerformed': {
      if (!isJsonObject(body)) throw new DefinitionError(inner, 'must be an object: {event, where?, within?}');
      rejectUnknownFields(body, ['event', 'where', 'within'], inner);
      countEventCondition(budget, inner);
      return { notPerformed: parseWindowedEvent(body, inner) };
    }
    case 'trait':
    case 'computedTrait': {
      if (!isJsonObject(body)) throw new DefinitionError(inner, 'must be an object: {key, op, value}');
      rejectUnknownFields(body, ['key', 'op', 'value'], inner);
      // A profile trait may be a dotted path (`address.city`); a computed trait is named by its key.
      const key = kind === 'trait' ? parsePath(body['key'], `${inner}.key`) : parseKey(body['key'], `${inner}.key`);
      const comparison = parseComparison(body, inner);
      return kind === 'trait' ? { trait: { key, ...comparison } } : { computedTrait: { key, ...comparison } };
    }
    case 'inAudience':
      return { inAudience: parseKey(body, inner) };
    case 'notInAudience':
      return { notInAudience: parseKey(body, inner) };
    case 'and':
    case 'or': {
      if (!Array.isArray(body) || body.length === 0 || body.length > DEFINITION_LIMITS.listLength) {
        throw new DefinitionError(inner, `must list 1 to ${DEFINITION_LIMITS.listLength} conditions`);
      }
      const list = body.map((item, index) => parseAudienceCondition(item, `${inner}[${index}]`, depth + 1, budget));
      return kind === 'and' ? { and: list } : { or: list };
    }
    case 'not':
      return { not: parseAudienceCondition(body, inner, depth + 1, budget) };
    default:
      throw new DefinitionError(inner, 'is not a condition; use one of performed, notPerformed, trait, computedTrait, inAudience, notInAudience, and, or, not');
  }
}

function countEventCondition(budget: { eventConditions: number }, at: string): void {
  if (++budget.eventConditions > DEFINITION_LIMITS.eventConditions) {
    throw new DefinitionError(at, `is one event condition too many: an audience has at most ${DEFINITION_LIMITS.eventConditions} performed/notPerformed`);
  }
}

function parseWindowedEvent(json: Record<string, unknown>, at: string): WindowedEvent {
  const event = parseEventSelector(json['event'], `${at}.event`);
  const where = json['where'] === undefined ? undefined : parseWhere(json['where'], `${at}.where`);
  const within = json['within'] === undefined ? undefined : json['within'];
  if (within !== undefined) parseWithin(within, `${at}.within`);
  const result: { event: EventSelector; where?: PropertyCondition[]; within?: string } = { event };
  if (where !== undefined && where.length > 0) result.where = where;
  if (within !== undefined) result.within = within as string;
  return result;
}

function parseEventSelector(json: unknown, at: string): EventSelector {
  if (typeof json === 'string') {
    if (json.length === 0 || json.length > DEFINITION_LIMITS.nameLength) throw new DefinitionError(at, `must be an event name of 1 to ${DEFINITION_LIMITS.nameLength} characters`);
    return json;
  }
  if (isJsonObject(json)) {
    const type = json['type'];
    if (Object.keys(json).length === 1 && typeof type === 'string' && (MESSAGE_TYPES as readonly string[]).includes(type)) {
      return { type: type as (typeof MESSAGE_TYPES)[number] };
    }
    throw new DefinitionError(Object.keys(json).length === 1 && type !== undefined ? `${at}.type` : at, `must be {"type": one of ${MESSAGE_TYPES.join(', ')}}`);
  }
  throw new DefinitionError(at, 'must be a track event name or {"type": "page"} (track, page, screen, identify, group)');
}

function parseWhere(json: unknown, at: string): PropertyCondition[] {
  if (!Array.isArray(json) || json.length > DEFINITION_LIMITS.listLength) {
    throw new DefinitionError(at, `must be a list of at most ${DEFINITION_LIMITS.listLength} conditions {property, op, value}`);
  }
  return json.map((item, index) => {
    const here = `${at}[${index}]`;
    if (!isJsonObject(item)) throw new DefinitionError(here, 'must be an object: {property, op, value}');
    rejectUnknownFields(item, ['property', 'op', 'value'], here);
    return { property: parsePath(item['property'], `${here}.property`), ...parseComparison(item, here) };
  });
}

/** `op` and `value` of a comparison, with the rules of destination filters' conditions. */
function parseComparison(json: Record<string, unknown>, at: string): { op: Operator; value?: unknown } {
  const op = json['op'];
  if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) {
    throw new DefinitionError(`${at}.op`, `must be one of ${OPERATORS.join(' ')}`);
  }
  const value = json['value'];
  if (op === 'exists') {
    if (value !== undefined) throw new DefinitionError(`${at}.value`, 'must be absent with "exists"');
    return { op };
  }
  if (value === undefined) throw new DefinitionError(`${at}.value`, `is required with "${op}"`);
  if (JSON.stringify(value).length > DEFINITION_LIMITS.valueLength) {
    throw new DefinitionError(`${at}.value`, `is longer than ${DEFINITION_LIMITS.valueLength} characters as JSON`);
  }
  if ((op === '>' || op === '>=' || op === '<' || op === '<=') && typeof value !== 'number' && typeof value !== 'string') {
    throw new DefinitionError(`${at}.value`, `must be a number or a string with "${op}"`);
  }
  return { op: op as Operator, value };
}

function parseCount(json: unknown, at: string): { op: CountOperator; value: number } {
  if (json === undefined) return { op: '>=', value: 1 };
  if (!isJsonObject(json)) throw new DefinitionError(at, 'must be an object: {op, value}, e.g. {"op": ">=", "value": 2}');
  rejectUnknownFields(json, ['op', 'value'], at);
  const op = json['op'];
  if (typeof op !== 'string' || !(COUNT_OPERATORS as readonly string[]).includes(op)) {
    throw new DefinitionError(`${at}.op`, `must be one of ${COUNT_OPERATORS.join(' ')}`);
  }
  const value = json['value'];
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > DEFINITION_LIMITS.count) {
    throw new DefinitionError(`${at}.value`, `must be a whole number from 0 to ${DEFINITION_LIMITS.count}`);
  }
  return { op: op as CountOperator, value };
}

function parsePath(json: unknown, at: string): string {
  if (typeof json !== 'string' || json.length > DEFINITION_LIMITS.nameLength || !PATH.test(json)) {
    throw new DefinitionError(at, `must be a dotted path of at most ${DEFINITION_LIMITS.nameLength} characters, e.g. "product.sku"`);
  }
  return json;
}

/** Validates a computed trait's or audience's key (lower snake_case). */
export function parseKey(json: unknown, at = 'key'): string {
  if (typeof json !== 'string' || json.length > DEFINITION_LIMITS.nameLength || !KEY.test(json)) {
    throw new DefinitionError(at, `must be a key of lower-case letters, digits and _ (at most ${DEFINITION_LIMITS.nameLength} characters), e.g. "high_value_users"`);
  }
  return json;
}

function rejectUnknownFields(json: Record<string, unknown>, allowed: readonly string[], at: string): void {
  for (const key of Object.keys(json)) {
    if (!allowed.includes(key)) throw new DefinitionError(`${at}.${key.slice(0, 60)}`, `is not a field here; allowed: ${allowed.join(', ')}`);
  }
}

/**
 * 'High Value Users' → 'high_value_users'; 'ordersLast30d' → 'orders_last30d';
 * accents are dropped ('Café fans' → 'cafe_fans'). Throws a DefinitionError
 * on `name` when nothing of the name can make a key.
 */
export function keyFromName(name: string): string {
  const key = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, DEFINITION_LIMITS.nameLength)
    .replace(/_+$/, '');
  if (key === '') throw new DefinitionError('name', 'has no letters or digits to make a key from; give a "key"');
  return key;
}

/** Keys of other computations a definition reads (inAudience/notInAudience/computedTrait), each once, in order of appearance. */
export function referencedKeys(definition: AudienceDefinition | ComputedTraitDefinition): string[] {
  const keys = new Set<string>();
  const visit = (condition: AudienceCondition): void => {
    if ('inAudience' in condition) keys.add(condition.inAudience);
    else if ('notInAudience' in condition) keys.add(condition.notInAudience);
    else if ('computedTrait' in condition) keys.add(condition.computedTrait.key);
    else if ('and' in condition) condition.and.forEach(visit);
    else if ('or' in condition) condition.or.forEach(visit);
    else if ('not' in condition) visit(condition.not);
  };
  if (!('type' in definition)) visit(definition);
  return [...keys];
}
