import type { FastifyInstance } from 'fastify';
import { type JsonSchema, documented } from '../route-documentation.js';
import { idParams, ok, time } from './schema-parts.js';
import type { TransformationAdmin } from './transformation-admin.js';

const transformationVersion: JsonSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, name: { type: 'string' }, version: { type: 'integer' }, code: { type: 'string' }, createdAt: time },
};
const transformationBody: JsonSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'Up to 200 characters' },
    code: { type: 'string', description: 'An ES module exporting transformEvent(event, metadata) and/or transformBatch(events, metadata); at most 256 KB' },
  },
};
const versionParams: JsonSchema = { type: 'object', properties: { id: { type: 'string' }, version: { type: 'string' } }, required: ['id', 'version'] };

const TRANSFORMATION_SCHEMAS = documented({
  create: {
    summary: 'Create a transformation (version 1); the code is compiled first',
    tags: ['transformations'],
    body: { ...transformationBody, required: ['name', 'code'], additionalProperties: false },
    'x-responses': { 201: ok('The transformation', transformationVersion) },
    'x-errors': ['invalid_request', 'invalid_transformation'],
  },
  list: {
    summary: 'List transformations (latest version numbers, no code)',
    tags: ['transformations'],
    'x-responses': { 200: ok('The transformations', { type: 'object', properties: { transformations: { type: 'array', items: { type: 'object' } } } }) },
  },
  get: {
    summary: 'Read a transformation: its latest version and the list of versions',
    tags: ['transformations'],
    params: idParams,
    'x-responses': { 200: ok('The latest version', transformationVersion) },
    'x-errors': ['not_found'],
  },
  getVersion: {
    summary: 'Read one version of a transformation',
    tags: ['transformations'],
    params: versionParams,
    'x-responses': { 200: ok('The version', transformationVersion) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  update: {
    summary: 'Save a new version of a transformation (and optionally rename it)',
    tags: ['transformations'],
    params: idParams,
    body: { ...transformationBody, required: ['code'], additionalProperties: false },
    'x-responses': { 200: ok('The new version', transformationVersion) },
    'x-errors': ['invalid_request', 'invalid_transformation', 'not_found'],
  },
  delete: {
    summary: 'Delete a transformation with all its versions',
    tags: ['transformations'],
    params: idParams,
    'x-responses': { 204: ok('Deleted') },
    'x-errors': ['not_found', 'transformation_in_use'],
  },
  test: {
    summary: 'Run code, or a stored version, on sample events; nothing is stored',
    tags: ['transformations'],
    body: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        id: { type: 'string' },
        version: { type: 'integer', minimum: 1 },
        events: { type: 'array', items: { type: 'object' }, description: '1 to 100 messages' },
      },
      required: ['events'],
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
                output: { description: 'The message delivered, or a list of them (a split)' },
                dropped: { type: 'boolean' },
                error: { type: 'string' },
                logs: { type: 'array', items: { type: 'string' } },
              },
            },
          },
          durationMs: { type: 'number' },
        },
      }),
    },
    'x-errors': ['invalid_request', 'invalid_transformation', 'not_found'],
  },
});

/** Transformations, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function transformationRoutes(admin: TransformationAdmin): (app: FastifyInstance) => void {
  return (app) => {
    app.post('/transformations', { schema: TRANSFORMATION_SCHEMAS.create }, async (request, reply) => reply.code(201).send(await admin.create(request.body)));
    app.get('/transformations', { schema: TRANSFORMATION_SCHEMAS.list }, async () => admin.list());
    app.post('/transformations/test', { schema: TRANSFORMATION_SCHEMAS.test }, async (request) => admin.test(request.body));
    app.get<{ Params: { id: string } }>('/transformations/:id', { schema: TRANSFORMATION_SCHEMAS.get }, async (request) => admin.get(request.params.id));
    app.get<{ Params: { id: string; version: string } }>('/transformations/:id/versions/:version', { schema: TRANSFORMATION_SCHEMAS.getVersion }, async (request) =>
      admin.getVersion(request.params.id, request.params.version),
    );
    app.put<{ Params: { id: string } }>('/transformations/:id', { schema: TRANSFORMATION_SCHEMAS.update }, async (request) => admin.update(request.params.id, request.body));
    app.delete<{ Params: { id: string } }>('/transformations/:id', { schema: TRANSFORMATION_SCHEMAS.delete }, async (request, reply) => {
      await admin.delete(request.params.id);
      return reply.code(204).send();
    });
  };
}
