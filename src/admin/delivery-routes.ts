import type { FastifyInstance } from 'fastify';
import type { DeliveryAdmin } from './delivery-admin.js';
import type { WebhookAdmin } from './webhook-admin.js';

/**
 * The admin routes of the Webhooks destination and its delivery queue, as an
 * `extensions` entry of {@link adminRoutes} (same auth and error shape).
 */
export function deliveryRoutes(webhooks: WebhookAdmin, deliveries: DeliveryAdmin): (app: FastifyInstance) => void {
  return (app) => {
    app.put<{ Params: { id: string } }>('/sources/:id/destinations/webhooks', async (request) => webhooks.put(request.params.id, request.body));
    app.get<{ Params: { id: string } }>('/sources/:id/destinations/webhooks', async (request) => webhooks.get(request.params.id));
    app.get<{ Params: { id: string } }>('/sources/:id/destinations/webhooks/standard-webhooks/secret', async (request) =>
      webhooks.standardSecret(request.params.id),
    );
    app.post<{ Params: { id: string } }>('/sources/:id/destinations/webhooks/standard-webhooks/rotate', async (request) =>
      webhooks.rotateStandardSecret(request.params.id, request.body),
    );

    app.get<{ Querystring: Record<string, string | undefined> }>('/deliveries', async (request) => deliveries.list(request.query));
    app.get<{ Params: { id: string } }>('/deliveries/:id', async (request) => deliveries.get(request.params.id));
    app.post<{ Params: { id: string } }>('/deliveries/:id/retry', async (request) => deliveries.retry(request.params.id));
    app.post('/deliveries/retry', async (request) => deliveries.retryAll(request.body));
  };
}
