import type { FastifyInstance } from 'fastify';
import type { ComputationKind } from '../store/store.js';
import { type JsonSchema, type RouteDocumentation, documented } from '../route-documentation.js';
import type { EngageAdmin } from './engage-admin.js';
import { idParams, ok, stringList, time } from './schema-parts.js';

type Query = Record<string, string | undefined>;

const computation: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    key: { type: 'string' },
    definition: { type: 'object' },
    destinations: stringList('Source ids whose Webhooks destination receives the syncs'),
    status: { enum: ['computing', 'live'] },
    size: { type: 'integer', description: 'Audiences: current members' },
    createdAt: time,
    updatedAt: time,
  },
};

const computationBody = (required: readonly string[]): JsonSchema => ({
  type: 'object',
  properties: {
    name: { type: 'string' },
    key: { type: 'string', description: 'Lower snake_case; default: made from the name' },
    definition: { type: 'object', description: 'See "Audiences and computed traits" in the README' },
    destinations: stringList('Source ids whose Webhooks destination receives the syncs'),
  },
  required,
});

function computationSchemas(noun: string, plural: string, listKey: string, tag: string): Record<'create' | 'list' | 'get' | 'update' | 'remove', RouteDocumentation> {
  return {
    create: {
      summary: `Create ${noun}: computed over stored history, then kept up to date`,
      tags: [tag],
      body: computationBody(['name', 'definition']),
      'x-responses': { 201: ok(`The new ${noun}, status computing`, computation) },
      'x-errors': ['invalid_request', 'invalid_definition', 'key_conflict'],
    },
    list: {
      summary: `List ${plural}`,
      tags: [tag],
      'x-responses': { 200: ok(`Every ${noun}`, { type: 'object', properties: { [listKey]: { type: 'array', items: computation } } }) },
    },
    get: { summary: `One ${noun}`, tags: [tag], params: idParams, 'x-responses': { 200: ok(`The ${noun}`, computation) }, 'x-errors': ['not_found'] },
    update: {
      summary: `Change the name, definition or destinations of ${noun} (a new definition is computed again)`,
      tags: [tag],
      params: idParams,
      body: computationBody([]),
      'x-responses': { 200: ok(`The ${noun}`, computation) },
      'x-errors': ['invalid_request', 'invalid_definition', 'not_found'],
    },
    remove: {
      summary: `Delete ${noun}: it stops syncing`,
      tags: [tag],
      params: idParams,
      'x-responses': { 204: ok('Deleted') },
      'x-errors': ['invalid_request', 'not_found'],
    },
  };
}

const identifierParams: JsonSchema = {
  type: 'object',
  properties: { identifier: { type: 'string', description: 'user_id:<userId> or anonymous_id:<anonymousId>' } },
  required: ['identifier'],
};

const ENGAGE_SCHEMAS = {
  traits: documented(computationSchemas('a computed trait', 'computed traits', 'computedTraits', 'computed traits')),
  audiences: documented(computationSchemas('an audience', 'audiences', 'audiences', 'audiences')),
  ...documented({
    members: {
      summary: "An audience's current members in the order they joined, paged",
      tags: ['audiences'],
      params: idParams,
      querystring: { type: 'object', properties: { limit: { type: 'string' }, cursor: { type: 'string' } } },
      'x-responses': {
        200: ok('Members, first to join first (the same time: by profile id), and a cursor for the next page when there may be more', {
          type: 'object',
          properties: {
            members: {
              type: 'array',
              items: { type: 'object', properties: { profileId: { type: 'string' }, userId: { type: 'string' }, anonymousId: { type: 'string' }, since: time } },
            },
            cursor: { type: 'string' },
          },
        }),
      },
      'x-errors': ['invalid_request', 'not_found'],
    },
    profile: {
      summary: 'A profile: identifiers, traits, computed traits and audiences',
      tags: ['profiles'],
      params: identifierParams,
      'x-nul-mapped': ['identifier'],
      querystring: { type: 'object', properties: { identifiersLimit: { type: 'string' }, identifiersCursor: { type: 'string' } } },
      'x-responses': {
        200: ok('The profile', {
          type: 'object',
          properties: {
            id: { type: 'string' },
            identifiers: { type: 'array', items: { type: 'string' } },
            identifiersCursor: { type: 'string' },
            traits: { type: 'object' },
            computedTraits: { type: 'object' },
            audiences: { type: 'array', items: { type: 'string' } },
          },
        }),
      },
      'x-errors': ['invalid_request', 'profile_not_found'],
    },
    events: {
      summary: "A profile's recent messages, newest first",
      tags: ['profiles'],
      params: identifierParams,
      'x-nul-mapped': ['identifier'],
      querystring: { type: 'object', properties: { limit: { type: 'string' } } },
      'x-responses': { 200: ok('Messages', { type: 'object', properties: { events: { type: 'array', items: { type: 'object' } } } }) },
      'x-errors': ['invalid_request', 'profile_not_found'],
    },
  }),
};

/** Computed traits, audiences and profiles, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function engageRoutes(engage: EngageAdmin): (app: FastifyInstance) => void {
  return (app) => {
    const collections: Array<[string, ComputationKind, typeof ENGAGE_SCHEMAS.traits]> = [
      ['/computed-traits', 'trait', ENGAGE_SCHEMAS.traits],
      ['/audiences', 'audience', ENGAGE_SCHEMAS.audiences],
    ];
    for (const [path, kind, schemas] of collections) {
      app.post(path, { schema: schemas.create }, async (request, reply) => reply.code(201).send(await engage.create(kind, request.body)));
      app.get(path, { schema: schemas.list }, async () => engage.list(kind));
      app.get<{ Params: { id: string } }>(`${path}/:id`, { schema: schemas.get }, async (request) => engage.get(kind, request.params.id));
      app.patch<{ Params: { id: string } }>(`${path}/:id`, { schema: schemas.update }, async (request) => engage.update(kind, request.params.id, request.body));
      app.delete<{ Params: { id: string } }>(`${path}/:id`, { schema: schemas.remove }, async (request, reply) => {
        await engage.remove(kind, request.params.id);
        return reply.code(204).send();
      });
    }
    app.get<{ Params: { id: string }; Querystring: Query }>('/audiences/:id/members', { schema: ENGAGE_SCHEMAS.members }, async (request) =>
      engage.members(request.params.id, request.query),
    );
    app.get<{ Params: { identifier: string }; Querystring: Query }>('/profiles/:identifier', { schema: ENGAGE_SCHEMAS.profile }, async (request) =>
      engage.profile(request.params.identifier, request.query),
    );
    app.get<{ Params: { identifier: string }; Querystring: Query }>('/profiles/:identifier/events', { schema: ENGAGE_SCHEMAS.events }, async (request) =>
      engage.events(request.params.identifier, request.query),
    );
  };
}
