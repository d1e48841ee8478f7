import type { JsonSchema } from '../route-documentation.js';

/** Pieces of JSON Schema the admin routes' schemas share. */

export const time: JsonSchema = { type: 'string', format: 'date-time' };
/** A time a client sends: ISO-8601, or epoch milliseconds, 1970 to 9999 (see `timeParam`). */
export const timeInput: JsonSchema = { type: ['string', 'integer'], description: 'An ISO-8601 time, or epoch milliseconds; from 1970-01-01 to 9999-12-31 (UTC)' };
export const idParams: JsonSchema = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] };
export const stringList = (description: string): JsonSchema => ({ type: 'array', items: { type: 'string' }, description });

/** A documented response: its description, and its body's schema when it has one. */
export const ok = (description: string, schema?: JsonSchema): { description: string; schema?: JsonSchema } =>
  schema === undefined ? { description } : { description, schema };
