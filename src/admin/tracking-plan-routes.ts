import type { FastifyInstance } from 'fastify';
import { type JsonSchema, documented } from '../http/openapi.js';
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
const ok = (description: string, body?: JsonSchema) => (body === undefined ? { description } : { description, schema: body });

export const TRACKING_PLAN_SCHEMAS = documented({
  create: {
    summary: "Set the source's tracking plan (a new version)",
    tags: ['tracking plans'],
    params: idParams,
    body: { type: 'object' },
    'x-responses': { 201: ok('The plan, with its id and new version', view) },
    'x-errors': ['invalid_request', 'invalid_tracking_plan', 'not_found'],
  },
  replace: {
    summary: "Replace the source's tracking plan (a new version)",
    tags: ['tracking plans'],
    params: idParams,
    body: { type: 'object' },
    'x-responses': { 200: ok('The plan, with its id and new version', view) },
    'x-errors': ['invalid_request', 'invalid_tracking_plan', 'not_found'],
  },
  get: { summary: "Read the source's tracking plan", tags: ['tracking plans'], params: idParams, 'x-responses': { 200: ok('The current version', view) }, 'x-errors': ['not_found'] },
  delete: { summary: "Remove the source's tracking plan", tags: ['tracking plans'], params: idParams, 'x-responses': { 204: ok('Removed') }, 'x-errors': ['not_found'] },
});

/** The tracking-plan routes, as an `extensions` entry of `adminRoutes`. */
export function trackingPlanRoutes(plans: TrackingPlanAdmin): (app: FastifyInstance) => void {
  return (app) => {
    const path = '/sources/:id/tracking-plan';
    app.post<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.create }, async (request, reply) => reply.code(201).send(await plans.put(request.params.id, request.body)));
    app.put<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.replace }, async (request) => plans.put(request.params.id, request.body));
    app.get<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.get }, async (request) => plans.get(request.params.id));
    app.delete<{ Params: { id: string } }>(path, { schema: TRACKING_PLAN_SCHEMAS.delete }, async (request, reply) => {
      await plans.delete(request.params.id);
      return reply.code(204).send();
    });
  };
}
