import type { FastifyInstance } from 'fastify';
import { TRANSFORMATION_SCHEMAS } from './route-schemas.js';
import type { TransformationAdmin } from './transformation-admin.js';

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
