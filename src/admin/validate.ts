import { closest } from '../domain/closest-name.js';
import { jsonBoundsProblem } from '../domain/json-safety.js';
import type { JsonObject } from '../domain/message.js';
import { LIMITS, isJsonObject } from '../domain/message.js';
import { ApiError, type ErrorCode } from '../errors.js';

/** Input checks shared by the admin routes and the CLI; each error names the field. */
export function requireObject(value: unknown, what = 'the body'): JsonObject {
  if (!isJsonObject(value)) throw new ApiError('invalid_request', `${what} must be a JSON object`);
  return value;
}

export function rejectUnknownFields(body: JsonObject, allowed: readonly string[], where?: string): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) throw new ApiError('invalid_request', unknownFieldMessage(key, allowed, where));
  }
}

/**
 * `unknown field "cdoe" (did you mean "code"?); allowed: name, code`: a
 * typo names the field it was meant to be, since the one it stands for is
 * also missing (the route schemas and services report an unknown field
 * before a missing one for that reason).
 */
export function unknownFieldMessage(key: string, allowed: readonly string[], where?: string): string {
  const shown = key.slice(0, 60);
  const meant = closest(key, allowed);
  const field = where === undefined ? `"${shown}"` : `"${where}.${shown}"`;
  return `unknown field ${field}${meant === undefined ? '' : ` (did you mean "${meant}"?)`}; allowed: ${allowed.join(', ')}`;
}

export function requireName(value: unknown, field = 'name'): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > 200) {
    throw new ApiError('invalid_request', `${field} must be a non-empty string of at most 200 characters`);
  }
  if (value.includes('\u0000')) throw new ApiError('invalid_request', `${field} must not hold U+0000`);
  return value.trim();
}

/**
 * U+0000 in an id this API makes (a source's, a replay's, a
 * transformation's…): none ever holds one, and PostgreSQL text cannot, so
 * such a value is a 400 naming the field rather than a lookup. adminRoutes
 * applies it to every path and query parameter; services to the ids their
 * bodies name.
 */
export function refuseNul(value: unknown, field: string, code: ErrorCode = 'invalid_request'): void {
  if (typeof value === 'string' && value.includes('\u0000')) throw new ApiError(code, `${field} must not hold U+0000 (no id this API makes does)`);
}

export function optionalBoolean(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new ApiError('invalid_request', `${field} must be true or false`);
  return value;
}

/**
 * A count from a query string or a body: decimal digits (a string) or a JSON
 * integer, from `min` to `max`. Hex (`0x10`), exponents (`1e1`), signs and
 * spaces are refused, though `Number()` would take them.
 */
export function integerParam(value: unknown, field: string, min: number, max: number): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) throw new ApiError('invalid_request', `${field} must be an integer from ${min} to ${max}`);
  return n;
}

/** A page size: {@link integerParam} from 1 to `max`; `fallback` when absent. */
export function limitParam(value: unknown, fallback: number, max: number, field = 'limit'): number {
  if (value === undefined || value === '') return fallback;
  return integerParam(value, field, 1, max);
}

/**
 * The times the admin API takes (a query's `since`/`until`, a body's
 * `since`, `from`, `to`): 1970-01-01T00:00:00.000Z to
 * 9999-12-31T23:59:59.999Z, epoch ms 0 to 253402300799999. Every
 * JavaScript Date, PostgreSQL bigint and four-digit ISO-8601 year holds
 * them, so a time taken is one every store and view can hold.
 */
export const MIN_TIME_MS = 0;
export const MAX_TIME_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** An ISO-8601 date, or date and time (`T` or a space), with an optional fraction and offset (`Z`, `+01:00`, `+0100`). */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?$/;

/** How {@link timeParam} names the form it takes, in its 400. */
export const TIME_FORM = 'an ISO-8601 time (2026-01-31T12:00:00Z) or epoch milliseconds, from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z';

/**
 * A time: an ISO-8601 string, or epoch milliseconds (a JSON integer or a
 * string of digits), from {@link MIN_TIME_MS} to {@link MAX_TIME_MS};
 * undefined when absent. Anything else is a 400 naming the field and the form.
 */
export function timeParam(value: unknown, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  let ms = NaN;
  if (typeof value === 'number') ms = Number.isInteger(value) ? value : NaN;
  else if (typeof value === 'string') ms = /^\d+$/.test(value) ? Number(value) : ISO_TIME.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms) || ms < MIN_TIME_MS || ms > MAX_TIME_MS) throw new ApiError('invalid_request', `${field} must be ${TIME_FORM}`);
  return ms;
}

/** Whether {@link timeParam} takes `value` as a time (absent is not one). */
export function isTime(value: unknown): boolean {
  try {
    return timeParam(value, 'time') !== undefined;
  } catch {
    return false;
  }
}

/**
 * How deep an admin body (or a CLI file) may nest, as a message may (see
 * `LIMITS.nestingDepth`): definitions, filters and settings need far less.
 */
export const MAX_BODY_DEPTH = LIMITS.nestingDepth;

/** The code of a bounds error by the body's top field, where that part has its own (Engage's definitions). */
const BOUNDS_CODES: Readonly<Record<string, ErrorCode>> = { definition: 'invalid_definition' };

/**
 * The 400 for a parsed body that nests deeper than {@link MAX_BODY_DEPTH} or
 * holds a number out of range (`1e400`), naming the field; undefined when it
 * has neither. Run before anything walks the body recursively.
 * `codes` maps top fields to their codes, as a route's `x-validation-codes`.
 */
export function jsonBoundsError(value: unknown, codes?: Readonly<Record<string, ErrorCode>>): ApiError | undefined {
  const found = jsonBoundsProblem(value, MAX_BODY_DEPTH);
  if (found === undefined) return undefined;
  const code = { ...BOUNDS_CODES, ...codes }[String(found.path[0])] ?? 'invalid_request';
  const field = bodyField(found.path);
  return new ApiError(
    code,
    found.problem === 'too-deep'
      ? `${field} nests deeper than ${MAX_BODY_DEPTH} levels`
      : `${field} is a number out of range (JSON numbers must be finite, at most about 1.8e308)`,
  );
}

/** `['definition', 'trait', 'value', 0, 0, …]` → `definition.trait.value[0][0]…` (the first segments only). */
function bodyField(path: ReadonlyArray<string | number>): string {
  if (path.length === 0) return 'the body';
  const shown = path.slice(0, 8).map((segment, index) => (typeof segment === 'number' ? `[${segment}]` : `${index === 0 ? '' : '.'}${segment.slice(0, 60)}`));
  return `${shown.join('')}${path.length > 8 ? '…' : ''}`;
}
