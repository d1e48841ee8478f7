import type { FastifyInstance } from 'fastify';
import type { ReplayAdmin } from './replay-admin.js';

/** Replays, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function replayRoutes(replays: ReplayAdmin): (app: FastifyInstance) => void {
  return (app) => {
    app.post<{ Params: { id: string } }>('/sources/:id/replays', async (request, reply) =>
      reply.code(201).send(await replays.create(request.params.id, request.body)),
    );
    app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>('/sources/:id/replays', async (request) =>
      replays.list(request.params.id, request.query),
    );
    app.get<{ Params: { id: string } }>('/replays/:id', async (request) => replays.get(request.params.id));
    app.post<{ Params: { id: string } }>('/replays/:id/cancel', async (request) => replays.cancel(request.params.id));
  };
}
