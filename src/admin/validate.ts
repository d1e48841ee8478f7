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
    if (!allowed.includes(key)) {
      const field = where === undefined ? `"${key.slice(0, 60)}"` : `"${where}.${key.slice(0, 60)}"`;
      throw new ApiError('invalid_request', `unknown field ${field}; allowed: ${allowed.join(', ')}`);
    }
  }
}

export function requireName(value: unknown, field = 'name'): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > 200) {
    throw new ApiError('invalid_request', `${field} must be a non-empty string of at most 200 characters`);
  }
  return value.trim();
}

export function optionalBoolean(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new ApiError('invalid_request', `${field} must be true or false`);
  return value;
}

export function limitParam(value: unknown, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new ApiError('invalid_request', `limit must be an integer from 1 to ${max}`);
  return n;
}

/** Parses an ISO-8601 time or epoch milliseconds. */
export function timeParam(value: unknown, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'number' && typeof value !== 'string') throw new ApiError('invalid_request', `${field} must be an ISO-8601 time`);
  const ms = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) throw new ApiError('invalid_request', `${field} must be an ISO-8601 time`);
  return ms;
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
