import type { DocumentedSchema } from '../route-documentation.js';
import type { ErrorCode } from '../errors.js';

/**
 * How the Tracking API's routes are documented. Their bodies are read by the
 * API's own parser (any content type, gzip, size limits while streaming) and
 * checked by the normalizer, so these schemas describe, and Fastify does not
 * validate (`x-body`): a message that breaks a rule is still answered 200
 * and shown in the debugger, as Segment's API does.
 */
const ERRORS: readonly ErrorCode[] = [
  'invalid_json',
  'body_not_object',
  'body_too_large',
  'invalid_encoding',
  'unsupported_encoding',
  'invalid_write_key',
  'storage_unavailable',
  'overloaded',
];

const success = { 200: { description: 'Stored: {"success":true}', schema: { type: 'object', properties: { success: { const: true } } } } };

const common = {
  type: 'object',
  properties: {
    userId: { type: 'string' },
    anonymousId: { type: 'string' },
    messageId: { type: 'string' },
    timestamp: { type: 'string', format: 'date-time' },
    sentAt: { type: 'string', format: 'date-time' },
    context: { type: 'object' },
    integrations: { type: 'object' },
    writeKey: { type: 'string', description: 'The write key, when not sent as Basic auth' },
  },
} as const;

const fields: Record<string, Record<string, unknown>> = {
  identify: { traits: { type: 'object' } },
  track: { event: { type: 'string' }, properties: { type: 'object' } },
  page: { name: { type: 'string' }, category: { type: 'string' }, properties: { type: 'object' } },
  screen: { name: { type: 'string' }, properties: { type: 'object' } },
  group: { groupId: { type: 'string' }, traits: { type: 'object' } },
  alias: { previousId: { type: 'string' } },
};

/** A single call of `type`, at its long or short path. */
export function callSchema(type: string, path: string): DocumentedSchema {
  return {
    summary: `${type[0]!.toUpperCase()}${type.slice(1)} call${path === type ? '' : ` (short path of /v1/${type})`}`,
    tags: ['tracking'],
    'x-body': { ...common, properties: { ...common.properties, ...fields[type] } },
    'x-responses': success,
    'x-errors': ERRORS,
  };
}

export function batchSchema(path: string): DocumentedSchema {
  return {
    summary: path === 'batch' ? 'Batch of calls' : `Batch of calls (same as /v1/batch)`,
    tags: ['tracking'],
    'x-body': {
      type: 'object',
      properties: {
        batch: { type: 'array', items: { type: 'object', properties: { type: { enum: Object.keys(fields) } } }, maxItems: 2_500 },
        context: { type: 'object' },
        integrations: { type: 'object' },
        sentAt: { type: 'string', format: 'date-time' },
        writeKey: { type: 'string' },
      },
      required: ['batch'],
    },
    'x-responses': success,
    'x-errors': [...ERRORS, 'batch_element_too_large', 'batch_too_large', 'too_many_batch_elements', 'invalid_batch'],
  };
}

export const METRICS_SCHEMA: DocumentedSchema = {
  summary: "analytics.js's client metrics: read (up to 32 KB) and discarded; no write key needed",
  tags: ['tracking'],
  'x-responses': success,
  'x-errors': ['body_too_large'],
};

const writeKeyParam = { type: 'object', properties: { writeKey: { type: 'string' } }, required: ['writeKey'] } as const;
/**
 * The write key in a query string. Untyped so that Fastify lets every query
 * through to the route, which answers a missing or repeated key with its
 * own error code.
 */
const writeKeyQuery = { type: 'object', properties: { writeKey: { description: 'The write key' } } } as const;

/** The routes a website loads analytics.js and RudderStack's SDK settings from, and RudderStack's beacon endpoint. */
export const BROWSER_SCHEMAS = {
  settings: {
    summary: "analytics.js's settings for a write key (what it loads from Segment's CDN), pointing it back at this server",
    description: 'Cacheable (Cache-Control, ETag). Load analytics.js with cdnURL set to this server, or use the loader below.',
    tags: ['browser'],
    params: writeKeyParam,
    'x-responses': { 200: { description: 'The settings document (CDNSettings)' }, 304: { description: 'Not modified (If-None-Match)' } },
    'x-errors': ['unknown_write_key', 'invalid_host'],
  },
  loader: {
    summary: "analytics.js itself, from the installed @segment/analytics-next, where Segment's snippet loads it",
    tags: ['browser'],
    params: writeKeyParam,
    'x-responses': { 200: { description: 'JavaScript' }, 304: { description: 'Not modified (If-None-Match)' } },
    'x-errors': ['unknown_write_key', 'file_not_found'],
  },
  chunk: {
    summary: "A lazily loaded part of analytics.js, at the path it derives from its own script's URL",
    tags: ['browser'],
    params: { type: 'object', properties: { file: { type: 'string' } }, required: ['file'] },
    'x-responses': { 200: { description: 'JavaScript (immutable)' }, 304: { description: 'Not modified (If-None-Match)' } },
    'x-errors': ['file_not_found'],
  },
  sourceConfig: {
    summary: "RudderStack JS SDK's source config (its configUrl): no device-mode destinations, no reporting",
    tags: ['browser'],
    querystring: writeKeyQuery,
    'x-responses': { 200: { description: 'The source config' }, 304: { description: 'Not modified (If-None-Match)' } },
    'x-errors': ['unknown_write_key'],
  },
  beacon: {
    summary: "Batch of calls from RudderStack's JS SDK in beacon mode (navigator.sendBeacon: text/plain, write key in the query)",
    tags: ['tracking'],
    querystring: writeKeyQuery,
    'x-body': batchSchema('batch')['x-body'],
    'x-responses': success,
    'x-errors': [...ERRORS, 'batch_element_too_large', 'batch_too_large', 'too_many_batch_elements', 'invalid_batch'],
  },
} satisfies Record<string, DocumentedSchema>;
