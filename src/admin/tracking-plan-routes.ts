import type { FastifyInstance } from 'fastify';
import { type JsonSchema, documented } from '../route-documentation.js';
import type { TrackingPlanAdmin } from './tracking-plan-admin.js';

const idParams: JsonSchema = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] };
const schema: JsonSchema = { description: 'A JSON Schema (draft-07, or 2020-12 when its $schema says so)' };
const definition: JsonSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    events: { type: 'object', additionalProperties: { type: 'object', properties: { properties: schema } }, description: "Event name to {properties: schema of the track's properties}" },
    identify: { type: 'object', properties: { traits: schema } },
    group: { type: 'object', properties: { traits: schema } },
    common: { ...schema, description: 'A JSON Schema the whole message must match' },
    controls: {
      type: 'object',
      properties: {
        unplannedEvents: { enum: ['allow', 'flag', 'block'] },
        violations: { enum: ['allow', 'flag', 'block', 'omit'] },
        unplannedProperties: { enum: ['allow', 'omit'] },
      },
    },
  },
};
const view: JsonSchema = {
  type: 'object',
  properties: {
    ...(definition['properties'] as Record<string, unknown>),
    id: { type: 'string' },
    sourceId: { type: 'string' },
    version: { type: 'integer' },
    createdAt: { type: 'string', format: 'date-time' },
  },
};
/** A save's answer: the plan, and warnings that never refuse it. */
const saved: JsonSchema = {
  type: 'object',
  properties: {
    ...(view['properties'] as Record<string, unknown>),
    warnings: {
      type: 'array',
      description:
        'Required fields (of common, an event, identify or group traits) that none of the recent messages they apply to had (yesterday and today, UTC: common against the latest 100 stored messages, events against the 100 most frequent observed ones); empty when there is no recent traffic. The plan is saved all the same',
      items: {
        type: 'object',
        properties: {
          where: { type: 'string', description: 'common, event "<name>", identify traits or group traits' },
          field: { type: 'string', description: 'The required path, keys joined with "."' },
          closest: { type: 'string', description: 'The observed path closest to it, when one is close' },
          message: { type: 'string' },
        },
      },
    },
  },
};
const ok = (description: string, body?: JsonSchema) => (body === undefined ? { description } : { description, schema: body });
const periodQuery: JsonSchema = {
  type: 'object',
  properties: {
    since: { type: 'string', description: 'ISO-8601 time or epoch ms, 1970 to 9999; counted from the start of its UTC day. Default: 7 days before until' },
    until: { type: 'string', description: 'ISO-8601 time or epoch ms, 1970 to 9999; counted to the end of its UTC day (to: at most 9999-12-31T23:59:59.999Z). Default: now' },
  },
};
const schemaQuery: JsonSchema = {
  type: 'object',
  properties: {
    ...(periodQuery['properties'] as Record<string, unknown>),
    limit: { type: 'string', description: 'Events per page, 1 to 1000. Default: 100. A page also holds at most 2,000 paths across its events (at least one event)' },
    cursor: { type: 'string', description: 'The `cursor` of the previous page' },
  },
};
const jsonTypes = { type: 'array', items: { enum: ['string', 'integer', 'number', 'boolean', 'object', 'array', 'null'] } };
const observedSchema: JsonSchema = {
  type: 'object',
  properties: {
    sourceId: { type: 'string' },
    from: { type: 'string', format: 'date-time' },
    to: { type: 'string', format: 'date-time' },
    events: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          type: { type: 'string', description: 'The call type' },
          event: { type: ['string', 'null'], description: "A track's event name; null for other calls" },
          count: { type: 'integer' },
          in: { enum: ['properties', 'traits', null], description: 'Where the paths are' },
          paths: {
            type: 'array',
            items: { type: 'object', properties: { path: { type: 'string', description: 'Dot path; `[]` for the items of an array' }, types: jsonTypes, count: { type: 'integer' } } },
          },
          pathsTruncated: { type: 'boolean', description: 'Paths were left out: past 200 per event and day, or past the walk bounds' },
        },
      },
    },
    truncated: {
      type: 'object',
      properties: {
        events: { type: 'boolean', description: 'Not every event of the period is in this answer: more pages follow (`cursor`), or events went unrecorded past the daily cap' },
        unrecordedMessages: { type: 'integer' },
      },
    },
    cursor: { type: 'string', description: 'Pass it as `cursor` for the next page; absent on the last page' },
    limits: { type: 'object', additionalProperties: { type: 'integer' } },
  },
};
const violationCounts: JsonSchema = {
  type: 'object',
  properties: {
    sourceId: { type: 'string' },
    since: { type: 'string', format: 'date-time' },
    plan: { type: ['object', 'null'], properties: { id: { type: 'string' }, version: { type: 'integer' } } },
    violations: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          event: { type: ['string', 'null'] },
          callType: { type: 'string' },
          type: { type: 'string', description: 'Unplanned-Event, Required-Missing, Datatype-Mismatch, Additional-Properties, Advance-Rules-Violation or Unknown-Violation' },
          count: { type: 'integer' },
          latest: { type: 'object', properties: { messageId: { type: 'string' }, receivedAt: { type: 'string', format: 'date-time' }, violation: { type: 'object' } } },
        },
      },
    },
    truncated: { type: 'boolean' },
    unrecordedViolations: { type: 'integer' },
    limits: { type: 'object', additionalProperties: { type: 'integer' } },
  },
};

export const TRACKING_PLAN_SCHEMAS = documented({
  create: {
    summary: "Set the source's tracking plan (a new version)",
    tags: ['tracking plans'],
    params: idParams,
    body: { type: 'object' },
    'x-responses': { 201: ok('The plan, with its id and new version, and warnings', saved) },
    'x-errors': ['invalid_request', 'invalid_tracking_plan', 'not_found'],
  },
  replace: {
    summary: "Replace the source's tracking plan (a new version)",
    tags: ['tracking plans'],
    params: idParams,
    body: { type: 'object' },
    'x-responses': { 200: ok('The plan, with its id and new version, and warnings', saved) },
    'x-errors': ['invalid_request', 'invalid_tracking_plan', 'not_found'],
  },
  get: { summary: "Read the source's tracking plan", tags: ['tracking plans'], params: idParams, 'x-responses': { 200: ok('The current version', view) }, 'x-errors': ['not_found'] },
  delete: { summary: "Remove the source's tracking plan", tags: ['tracking plans'], params: idParams, 'x-responses': { 204: ok('Removed') }, 'x-errors': ['not_found'] },
  violations: {
    summary: "Violation counts of the source's tracking plan, per event and type, with the latest example of each",
    tags: ['tracking plans'],
    params: idParams,
    querystring: { type: 'object', properties: { since: { type: 'string', description: 'ISO-8601 time or epoch ms, 1970 to 9999; counted from the start of its hour. Default: 24 hours ago' } } },
    'x-responses': { 200: ok('The counts', violationCounts) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  schema: {
    summary: 'What the source has received: each call type and event with its count, each property path with the JSON types seen and a count; paged',
    tags: ['tracking plans'],
    params: idParams,
    querystring: schemaQuery,
    'x-responses': { 200: ok('A page of the observed schema of the period: events biggest count first, and a cursor for the next page when there is more', observedSchema) },
    'x-errors': ['invalid_request', 'not_found'],
  },
  fromSchema: {
    summary: "Draft a tracking plan from the source's observed schema: its most frequent events, up to 2,000 paths (not stored: edit it, then PUT it)",
    tags: ['tracking plans'],
    params: idParams,
    querystring: periodQuery,
    'x-responses': { 200: ok('The drafted plan', definition) },
    'x-errors': ['invalid_request', 'not_found'],
  },
});

/** The tracking-plan routes, as an `extensions` entry of `adminRoutes`. */
export function trackingPlanRoutes(plans: TrackingPlanAdmin): (app: FastifyInstance) => void {
  return (app) => {
    const path = '/sources/:id/tracking-plan';
    app.post<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.create }, async (request, reply) => reply.code(201).send(await plans.put(request.params.id, request.body)));
    app.put<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.replace }, async (request) => plans.put(request.params.id, request.body));
    app.get<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.get }, async (request) => plans.get(request.params.id));
    type Period = { Params: { id: string }; Querystring: { since?: string; until?: string; limit?: string; cursor?: string } };
    app.get<Period>(`${path}/violations`, { schema: TRACKING_PLAN_SCHEMAS.violations }, async (request) => plans.violations(request.params.id, request.query));
    app.post<Period>(`${path}/from-schema`, { schema: TRACKING_PLAN_SCHEMAS.fromSchema }, async (request) => plans.draftFromSchema(request.params.id, request.query));
    app.get<Period>('/sources/:id/schema', { schema: TRACKING_PLAN_SCHEMAS.schema }, async (request) => plans.observedSchema(request.params.id, request.query));
    app.delete<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.delete }, async (request, reply) => {
      await plans.delete(request.params.id);
      return reply.code(204).send();
    });
  };
}
