import type { FastifyInstance } from 'fastify';
import type { DeliveryAdmin } from './delivery-admin.js';
import { DELIVERY_SCHEMAS, WEBHOOK_SCHEMAS } from './route-schemas.js';
import type { WebhookAdmin } from './webhook-admin.js';
import type { WebhookTester } from './webhook-test.js';

/**
 * The admin routes of the Webhooks destination and its delivery queue, as an
 * `extensions` entry of {@link adminRoutes} (same auth and error shape).
 */
export function deliveryRoutes(webhooks: WebhookAdmin, deliveries: DeliveryAdmin, tester?: WebhookTester): (app: FastifyInstance) => void {
  return (app) => {
    if (tester !== undefined) {
      app.addHook('onClose', async () => tester.close());
      app.post<{ Params: { id: string } }>('/sources/:id/destinations/webhooks/test', { schema: WEBHOOK_SCHEMAS.test }, async (request) => tester.send(request.params.id));
    }
    app.put<{ Params: { id: string } }>('/sources/:id/destinations/webhooks', { schema: WEBHOOK_SCHEMAS.put }, async (request) => webhooks.put(request.params.id, request.body));
    app.get<{ Params: { id: string } }>('/sources/:id/destinations/webhooks', { schema: WEBHOOK_SCHEMAS.get }, async (request) => webhooks.get(request.params.id));
    app.delete<{ Params: { id: string } }>('/sources/:id/destinations/webhooks', { schema: WEBHOOK_SCHEMAS.delete }, async (request, reply) => {
      await webhooks.delete(request.params.id);
      return reply.code(204).send();
    });
    app.get<{ Params: { id: string } }>('/sources/:id/destinations/webhooks/standard-webhooks/secret', { schema: WEBHOOK_SCHEMAS.standardSecret }, async (request) =>
      webhooks.standardSecret(request.params.id),
    );
    app.post<{ Params: { id: string } }>('/sources/:id/destinations/webhooks/standard-webhooks/rotate', { schema: WEBHOOK_SCHEMAS.rotateStandardSecret }, async (request) =>
      webhooks.rotateStandardSecret(request.params.id, request.body),
    );

    app.get<{ Querystring: Record<string, string | undefined> }>('/deliveries', { schema: DELIVERY_SCHEMAS.list }, async (request) => deliveries.list(request.query));
    app.get<{ Params: { id: string } }>('/deliveries/:id', { schema: DELIVERY_SCHEMAS.get }, async (request) => deliveries.get(request.params.id));
    app.post<{ Params: { id: string } }>('/deliveries/:id/retry', { schema: DELIVERY_SCHEMAS.retry }, async (request) => deliveries.retry(request.params.id));
    app.post('/deliveries/retry', { schema: DELIVERY_SCHEMAS.retryAll }, async (request) => deliveries.retryAll(request.body));
  };
}
