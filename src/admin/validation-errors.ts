import type { FastifySchemaValidationError } from 'fastify';
import type { ErrorCode } from '../errors.js';
import { ApiError } from '../errors.js';
import { isJsonObject } from '../domain/message.js';
import { unknownFieldMessage } from './validate.js';

/**
 * Turns the first error of a route schema's validation into the admin API's
 * error: the field as the services name it (`settings.webhooks[0].url`),
 * what it must be, and the code of that part of the body. A route's schema
 * may map body paths to the codes its service uses for them
 * (`x-validation-codes`: `{"settings": "invalid_receivers"}`); the rest is
 * `invalid_request`.
 */
export function validationError(
  errors: readonly FastifySchemaValidationError[],
  context: string | undefined,
  codes: Readonly<Record<string, ErrorCode>> | undefined,
  schema: unknown,
  data?: unknown,
): ApiError {
  const error = errors[0];
  if (error === undefined) return new ApiError('invalid_request', `the ${context ?? 'request'} is not valid`);
  const segments = error.instancePath.split('/').slice(1).map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
  const params = error.params;
  // ajv checks `required` before `additionalProperties`, so `{"name", "cdoe"}` failed as "code is
  // required": an unknown field on the way to the error is named first, since it is often the cause.
  const unknown = unknownOnPath(schema, data, segments);
  if (unknown !== undefined) return new ApiError(codeFor(unknown.at, codes), unknownFieldMessage(unknown.key, unknown.allowed, unknown.at.length === 0 ? undefined : fieldName(unknown.at, context)));
  if (error.keyword === 'required' && typeof params['missingProperty'] === 'string') segments.push(params['missingProperty']);
  if (error.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    const allowed = Object.keys((schemaAt(schema, segments)?.['properties'] as Record<string, unknown> | undefined) ?? {});
    return new ApiError(codeFor(segments, codes), unknownFieldMessage(params['additionalProperty'], allowed, segments.length === 0 ? undefined : fieldName(segments, context)));
  }
  const field = fieldName(segments, context);
  // A missing field says what it must be, as a wrong one does.
  const ranged = ['required', 'minItems', 'maxItems', 'minLength', 'maxLength'].includes(error.keyword);
  const expected = ranged ? expectation(schemaAt(schema, segments)) : undefined;
  return new ApiError(codeFor(segments, codes), `${field} ${expected ?? describe(error, params)}`);
}

/**
 * The first field of `data` that a closed object schema (`additionalProperties: false`) does not
 * list, at the root or at an object on the way down `segments` (where the validation error is).
 */
function unknownOnPath(schema: unknown, data: unknown, segments: readonly string[]): { at: string[]; key: string; allowed: string[] } | undefined {
  let value = data;
  for (let depth = 0; depth <= segments.length; depth++) {
    const at = segments.slice(0, depth);
    const here = schemaAt(schema, at);
    const properties = here?.['properties'] as Record<string, unknown> | undefined;
    if (here?.['additionalProperties'] === false && properties !== undefined && isJsonObject(value)) {
      const key = Object.keys(value).find((k) => !Object.hasOwn(properties, k));
      if (key !== undefined) return { at, key, allowed: Object.keys(properties) };
    }
    if (depth === segments.length || value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[segments[depth]!];
  }
  return undefined;
}

/** The schema of the value at `segments`, or undefined. */
function schemaAt(schema: unknown, segments: readonly string[]): Record<string, unknown> | undefined {
  let current = schema as Record<string, unknown> | undefined;
  for (const segment of segments) {
    if (current === undefined) return undefined;
    const next = /^\d+$/.test(segment) ? current['items'] : (current['properties'] as Record<string, unknown> | undefined)?.[segment];
    current = next as Record<string, unknown> | undefined;
  }
  return current;
}

function expectation(schema: Record<string, unknown> | undefined): string | undefined {
  if (schema === undefined) return undefined;
  if (Array.isArray(schema['enum'])) return `must be one of ${schema['enum'].map(String).join(', ')}`;
  if (schema['const'] !== undefined) return `must be ${JSON.stringify(schema['const'])}`;
  if (schema['type'] === 'array' && typeof schema['minItems'] === 'number' && typeof schema['maxItems'] === 'number') {
    return `must be an array of ${schema['minItems']} to ${schema['maxItems']} items`;
  }
  if (schema['type'] === 'string' && typeof schema['minLength'] === 'number' && typeof schema['maxLength'] === 'number') {
    return `must be a string of ${schema['minLength']} to ${schema['maxLength']} characters`;
  }
  if (typeof schema['type'] === 'string' && schema['type'] !== 'array' && schema['type'] !== 'string') return `is required: ${ARTICLE[schema['type']] ?? schema['type']}`;
  return undefined;
}

function codeFor(segments: readonly string[], codes: Readonly<Record<string, ErrorCode>> | undefined): ErrorCode {
  if (codes === undefined || segments.length === 0) return 'invalid_request';
  return codes[segments[0]!] ?? 'invalid_request';
}

/** `['settings', 'webhooks', '0', 'url']` → `settings.webhooks[0].url`; no segment → "the body". */
function fieldName(segments: readonly string[], context: string | undefined): string {
  if (segments.length === 0) return context === 'querystring' ? 'the query' : 'the body';
  return segments.map((segment, index) => (/^\d+$/.test(segment) ? `[${segment}]` : index === 0 ? segment : `.${segment}`)).join('');
}

const ARTICLE: Readonly<Record<string, string>> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  null: 'null',
};

function describe(error: FastifySchemaValidationError, params: Record<string, unknown>): string {
  switch (error.keyword) {
    case 'type': {
      const types = String(params['type']).split(',');
      return `must be ${types.map((type) => ARTICLE[type] ?? type).join(' or ')}`;
    }
    case 'required':
      return 'is required';
    case 'enum':
      return `must be one of ${(params['allowedValues'] as unknown[]).map(String).join(', ')}`;
    case 'const':
      return `must be ${JSON.stringify(params['allowedValue'])}`;
    case 'minimum':
      return `must be at least ${String(params['limit'])}`;
    case 'maximum':
      return `must be at most ${String(params['limit'])}`;
    case 'minItems':
      return `must be an array of at least ${String(params['limit'])} items`;
    case 'maxItems':
      return `must be an array of at most ${String(params['limit'])} items`;
    case 'minLength':
      return `must be at least ${String(params['limit'])} characters long`;
    case 'maxLength':
      return `must be at most ${String(params['limit'])} characters long`;
    default:
      return error.message ?? 'is not valid';
  }
}
