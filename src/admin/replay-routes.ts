import type { FastifyInstance } from 'fastify';
import type { ReplayAdmin } from './replay-admin.js';
import { REPLAY_SCHEMAS } from './route-schemas.js';

/** Replays, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function replayRoutes(replays: ReplayAdmin): (app: FastifyInstance) => void {
  return (app) => {
    app.post<{ Params: { id: string } }>('/sources/:id/replays', { schema: REPLAY_SCHEMAS.create }, async (request, reply) =>
      reply.code(201).send(await replays.create(request.params.id, request.body)),
    );
    app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>('/sources/:id/replays', { schema: REPLAY_SCHEMAS.list }, async (request) =>
      replays.list(request.params.id, request.query),
    );
    app.get<{ Params: { id: string } }>('/replays/:id', { schema: REPLAY_SCHEMAS.get }, async (request) => replays.get(request.params.id));
    app.post<{ Params: { id: string } }>('/replays/:id/cancel', { schema: REPLAY_SCHEMAS.cancel }, async (request) => replays.cancel(request.params.id));
  };
}
