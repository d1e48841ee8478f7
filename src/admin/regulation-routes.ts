import type { FastifyInstance } from 'fastify';
import type { RegulationAdmin } from './regulation-admin.js';
import { REGULATION_SCHEMAS } from './route-schemas.js';

/**
 * 5,000 subject ids of up to 1,024 bytes of UTF-8 each do not fit the
 * server's default 1 MB; the route is behind the admin token, which is
 * checked before the body is read.
 */
const REGULATION_BODY_LIMIT = 16 * 1024 * 1024;

/** Deletion and suppression requests, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function regulationRoutes(regulations: RegulationAdmin): (app: FastifyInstance) => void {
  return (app) => {
    app.post('/regulations', { bodyLimit: REGULATION_BODY_LIMIT, schema: REGULATION_SCHEMAS.create }, async (request, reply) =>
      reply.code(201).send(await regulations.create(request.body)),
    );
    app.get<{ Querystring: Record<string, string | undefined> }>('/regulations', { schema: REGULATION_SCHEMAS.list }, async (request) => regulations.list(request.query));
    app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>('/regulations/:id', { schema: REGULATION_SCHEMAS.get }, async (request) =>
      regulations.get(request.params.id, request.query),
    );
  };
}
