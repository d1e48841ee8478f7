import type { FastifyInstance } from 'fastify';
import { type JsonSchema, documented } from '../route-documentation.js';
import type { FunctionAdmin } from './function-admin.js';

const time: JsonSchema = { type: 'string', format: 'date-time' };
const sourceParams: JsonSchema = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] };
const functionParams: JsonSchema = { type: 'object', properties: { id: { type: 'string' }, fid: { type: 'string' } }, required: ['id', 'fid'] };
const ok = (description: string, schema?: JsonSchema): { description: string; schema?: JsonSchema } => (schema === undefined ? { description } : { description, schema });

const fields = {
  name: { type: 'string', description: 'Unique per source, at most 100 characters: the integrations key' },
  code: { type: 'string', description: 'A script defining onTrack, onIdentify, onPage, onScreen, onGroup, onAlias and/or onDelete (event, settings); at most 256 KB' },
  settings: { type: 'object', description: 'Passed to the handlers as their second argument; at most 64 KB. Keys matching key|secret|token|password|auth are masked on read and kept when sent back masked or left out' },
  enabled: { type: 'boolean' },
  maxRequestsPerSecond: { type: ['integer', 'null'], minimum: 1, maximum: 10_000, description: 'Cap on calls per second (null: none)' },
};
const fetchRecord: JsonSchema = {
  type: 'object',
  properties: { method: { type: 'string' }, url: { type: 'string' }, status: { type: 'integer' }, error: { type: 'string' }, durationMs: { type: 'number' } },
};
const view: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    sourceId: { type: 'string' },
    name: { type: 'string' },
    version: { type: 'integer' },
    enabled: { type: 'boolean' },
    settings: { type: 'object' },
    maxRequestsPerSecond: { type: 'integer' },
    code: { type: 'string', description: 'On a single read and after a new version' },
    createdAt: time,
    updatedAt: time,
  },
};

export const FUNCTION_SCHEMAS = documented({
  create: {
    summary: 'Add a function destination to a source (version 1 of its code); the code is loaded first',
    tags: ['functions'],
    params: sourceParams,
    body: { type: 'object', properties: fields, required: ['name', 'code'], additionalProperties: false },
    'x-responses': { 201: ok('The function destination', view) },
    'x-errors': ['invalid_request', 'invalid_function', 'not_found', 'function_limit_reached', 'function_name_taken'],
    'x-validation-codes': { code: 'invalid_function' },
  },
  list: {
    summary: "List a source's function destinations (no code)",
    tags: ['functions'],
    params: sourceParams,
    'x-responses': { 200: ok('The function destinations', { type: 'object', properties: { functions: { type: 'array', items: view } } }) },
    'x-errors': ['not_found'],
  },
  get: {
    summary: 'Read a function destination with its current code',
    tags: ['functions'],
    params: functionParams,
    'x-responses': { 200: ok('The function destination', view) },
    'x-errors': ['not_found'],
  },
  update: {
    summary: 'Change a function destination: new code is a new version; or name, enabled, settings, maxRequestsPerSecond',
    tags: ['functions'],
    params: functionParams,
    body: { type: 'object', properties: fields, additionalProperties: false },
    'x-responses': { 200: ok('The function destination', view) },
    'x-errors': ['invalid_request', 'invalid_function', 'not_found', 'function_name_taken'],
    'x-validation-codes': { code: 'invalid_function' },
  },
  delete: {
    summary: 'Remove a function destination with its versions (its pending deliveries fail)',
    tags: ['functions'],
    params: functionParams,
    'x-responses': { 204: ok('Removed') },
    'x-errors': ['not_found'],
  },
  test: {
    summary: 'Run code on sample events with the real network rules; nothing is stored',
    tags: ['functions'],
    body: {
      type: 'object',
      properties: { code: fields.code, settings: fields.settings, events: { type: 'array', items: { type: 'object' }, description: '1 to 20 messages' } },
      required: ['code', 'events'],
      additionalProperties: false,
    },
    'x-responses': {
      200: ok('One result per event', {
        type: 'object',
        properties: {
          results: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                input: { type: 'object' },
                filled: { type: 'object', description: 'The fields ingest would have added that the event lacked (messageId, receivedAt, timestamp, originalTimestamp), with their values: the code ran on input with these' },
                ingestRejects: { type: 'string', description: 'Why ingest would reject this event (it would reach no code live); it ran all the same' },
                outcome: { enum: ['delivered', 'retry', 'failed'] },
                error: { type: 'string' },
                errorType: { type: 'string', description: 'RetryError, EventNotSupported, InvalidEventPayload, ValidationError, TypeError (fetch), Timeout, …' },
                fetches: { type: 'array', items: fetchRecord },
                logs: { type: 'array', items: { type: 'string' } },
                durationMs: { type: 'number' },
              },
            },
          },
        },
      }),
    },
    'x-errors': ['invalid_request', 'invalid_function'],
    'x-validation-codes': { code: 'invalid_function' },
  },
});

/** Function destinations, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function functionRoutes(admin: FunctionAdmin): (app: FastifyInstance) => void {
  return (app) => {
    type SourceRoute = { Params: { id: string } };
    type FunctionRoute = { Params: { id: string; fid: string } };
    app.post<SourceRoute>('/sources/:id/destinations/functions', { schema: FUNCTION_SCHEMAS.create }, async (request, reply) => reply.code(201).send(await admin.create(request.params.id, request.body)));
    app.get<SourceRoute>('/sources/:id/destinations/functions', { schema: FUNCTION_SCHEMAS.list }, async (request) => admin.list(request.params.id));
    app.get<FunctionRoute>('/sources/:id/destinations/functions/:fid', { schema: FUNCTION_SCHEMAS.get }, async (request) => admin.get(request.params.id, request.params.fid));
    app.put<FunctionRoute>('/sources/:id/destinations/functions/:fid', { schema: FUNCTION_SCHEMAS.update }, async (request) => admin.update(request.params.id, request.params.fid, request.body));
    app.delete<FunctionRoute>('/sources/:id/destinations/functions/:fid', { schema: FUNCTION_SCHEMAS.delete }, async (request, reply) => {
      await admin.delete(request.params.id, request.params.fid);
      return reply.code(204).send();
    });
    app.post('/functions/test', { schema: FUNCTION_SCHEMAS.test }, async (request) => admin.test(request.body));
  };
}
