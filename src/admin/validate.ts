import type { JsonObject } from '../domain/message.js';
import { isJsonObject } from '../domain/message.js';
import { ApiError } from '../errors.js';

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
