import { createServer } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { type AdminRoutesOptions, adminRoutes } from '../admin/admin-routes.js';
import { type TrackingRoutesOptions, trackingRoutes } from '../ingest/tracking-routes.js';
import type { Store } from '../store/store.js';
import type { Metrics } from './metrics.js';

export interface ServerOptions {
  readonly logger: Logger;
  readonly trustProxy: boolean;
  readonly store: Store;
  readonly metrics: Metrics;
  readonly tracking: TrackingRoutesOptions;
  readonly admin: AdminRoutesOptions;
}

/** Slow or endless request bodies are cut off after this long. */
const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How often Node looks for requests past their timeout. With its default,
 * 30 s, a body trickled one chunk a second was cut only after 89 s.
 */
const TIMEOUT_CHECK_MS = 2_000;

/** The one HTTP server: Tracking API, admin API, health and metrics. */
export function buildServer(options: ServerOptions): FastifyInstance {
  // Typed as Fastify's logger so the instance has Fastify's default type parameters.
  const loggerInstance: FastifyBaseLogger = options.logger;
  const app = Fastify({
    loggerInstance,
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: options.trustProxy,
    requestTimeout: REQUEST_TIMEOUT_MS,
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    serverFactory: (handler) =>
      createServer({ requestTimeout: REQUEST_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_MS }, handler),
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    try {
      await options.store.ping();
      return { status: 'ready' };
    } catch (error) {
      options.logger.warn({ err: error }, 'readiness check: storage unreachable');
      return reply.code(503).send({ status: 'unavailable', reason: 'storage unreachable' });
    }
  });
  app.get('/metrics', async (_request, reply) => {
    reply.header('content-type', options.metrics.registry.contentType);
    return options.metrics.registry.metrics();
  });

  void app.register(trackingRoutes, options.tracking);
  void app.register(adminRoutes, { ...options.admin, prefix: '/admin/v1' });
  return app;
}
