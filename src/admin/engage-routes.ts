import type { FastifyInstance } from 'fastify';
import type { ComputationKind } from '../store/store.js';
import type { EngageAdmin } from './engage-admin.js';
import { ENGAGE_SCHEMAS } from './route-schemas.js';

type Query = Record<string, string | undefined>;

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
