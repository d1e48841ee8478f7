import { isJsonObject } from './message.js';

/**
 * Conditions on a message's fields, as destination filters write them:
 * `{"field": "properties.plan", "op": "=", "value": "pro"}`, or `{"and": […]}`,
 * `{"or": […]}`, `{"not": …}`. The operators are those of audience
 * definitions.
 */
export type Condition =
  | { readonly field: string; readonly op: Operator; readonly value?: unknown }
  | { readonly and: readonly Condition[] }
  | { readonly or: readonly Condition[] }
  | { readonly not: Condition };

export const OPERATORS = ['=', '!=', '>', '>=', '<', '<=', 'contains', 'exists'] as const;
export type Operator = (typeof OPERATORS)[number];

const MAX_DEPTH = 8;
const MAX_BRANCHES = 50;
const MAX_PATH_LENGTH = 200;
const MAX_VALUE_LENGTH = 1_000;

/** A dotted path of plain keys: `properties.product.sku`. */
const PATH = /^[^.\s]+(\.[^.\s]+)*$/;

/** Validates an untrusted condition; throws a `ConditionError` naming the field at fault. */
export function parseCondition(input: unknown, at: string, depth = 0): Condition {
  if (!isJsonObject(input)) throw new ConditionError(at, 'must be an object: {field, op, value} or {and|or|not}');
  if (depth > MAX_DEPTH) throw new ConditionError(at, `nests more than ${MAX_DEPTH} levels`);
  const keys = Object.keys(input);
  if (keys.length === 1 && (keys[0] === 'and' || keys[0] === 'or')) {
    const key = keys[0];
    const list = input[key];
    if (!Array.isArray(list) || list.length === 0 || list.length > MAX_BRANCHES) {
      throw new ConditionError(`${at}.${key}`, `must list 1 to ${MAX_BRANCHES} conditions`);
    }
    const parsed = list.map((item, index) => parseCondition(item, `${at}.${key}[${index}]`, depth + 1));
    return key === 'and' ? { and: parsed } : { or: parsed };
  }
  if (keys.length === 1 && keys[0] === 'not') return { not: parseCondition(input['not'], `${at}.not`, depth + 1) };
  for (const key of keys) {
    if (key !== 'field' && key !== 'op' && key !== 'value') {
      throw new ConditionError(`${at}.${key.slice(0, 60)}`, 'is not a condition field; allowed: field, op, value (or a single and, or, not)');
    }
  }
  const field = input['field'];
  if (typeof field !== 'string' || field.length > MAX_PATH_LENGTH || !PATH.test(field)) {
    throw new ConditionError(`${at}.field`, 'must be a dotted path of the message, e.g. "properties.plan"');
  }
  const op = input['op'];
  if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) {
    throw new ConditionError(`${at}.op`, `must be one of ${OPERATORS.join(' ')}`);
  }
  const value = input['value'];
  if (op === 'exists') {
    if (value !== undefined) throw new ConditionError(`${at}.value`, 'must be absent with "exists"');
    return { field, op };
  }
  if (value === undefined) throw new ConditionError(`${at}.value`, `is required with "${op}"`);
  if (JSON.stringify(value).length > MAX_VALUE_LENGTH) throw new ConditionError(`${at}.value`, `is longer than ${MAX_VALUE_LENGTH} characters as JSON`);
  if ((op === '>' || op === '>=' || op === '<' || op === '<=') && typeof value !== 'number' && typeof value !== 'string') {
    throw new ConditionError(`${at}.value`, `must be a number or a string with "${op}"`);
  }
  return { field, op: op as Operator, value };
}

/** Whether `message` meets the condition. A missing field meets only `!=` and `not exists`. */
export function matches(condition: Condition, message: unknown): boolean {
  if ('and' in condition) return condition.and.every((c) => matches(c, message));
  if ('or' in condition) return condition.or.some((c) => matches(c, message));
  if ('not' in condition) return !matches(condition.not, message);
  return compare(readPath(message, condition.field), condition.op, condition.value);
}

/** The value at a dotted path, or undefined. Own properties only. */
export function readPath(value: unknown, path: string): unknown {
  let current = value;
  for (const key of path.split('.')) {
    if (!isJsonObject(current) || !Object.hasOwn(current, key)) return undefined;
    current = current[key];
  }
  return current;
}

/** One comparison with the operators of audience definitions. */
export function compare(actual: unknown, op: Operator, expected: unknown): boolean {
  switch (op) {
    case 'exists':
      return actual !== undefined && actual !== null;
    case '=':
      return equal(actual, expected);
    case '!=':
      return !equal(actual, expected);
    case 'contains':
      if (typeof actual === 'string') return typeof expected === 'string' && actual.includes(expected);
      if (Array.isArray(actual)) return actual.some((item) => equal(item, expected));
      return false;
    default:
      return ordered(actual, op, expected);
  }
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Numbers compare as numbers and strings as strings (ISO times order correctly); mixed kinds never match. */
function ordered(actual: unknown, op: '>' | '>=' | '<' | '<=', expected: unknown): boolean {
  if (typeof actual !== typeof expected || (typeof actual !== 'number' && typeof actual !== 'string')) return false;
  const a = actual;
  const b = expected as number | string;
  switch (op) {
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
  }
}

/** A condition that is not valid; `field` is its JSON path. */
export class ConditionError extends Error {
  override readonly name = 'ConditionError';
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`${field} ${problem}`);
  }
}
