import { type RequestListener, createServer } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { type AdminRoutesOptions, adminRoutes } from '../admin/admin-routes.js';
import { type BrowserRoutesOptions, browserRoutes } from '../ingest/browser-routes.js';
import { allowAnyOrigin } from '../ingest/cors.js';
import { TRACKING_ROUTES, TrackingApi, type TrackingApiOptions } from '../ingest/tracking-api.js';
import type { Store } from '../store/store.js';
import { VERSION } from '../version.js';
import type { ConnectionCaps, ConnectionRefusal } from '../domain/connection-caps.js';
import { ConnectionAdmission } from './connection-admission.js';
import { ConnectionGuard } from './connection-guard.js';
import { consoleRoutes } from './console-routes.js';
import { answerPathError } from './path-errors.js';
import { shownPath } from '../domain/shown-path.js';
import { LogThrottle } from '../util/log-throttle.js';
import type { Metrics } from '../metrics.js';
import { type DocumentedSchema, documented } from '../route-documentation.js';
import { RouteCatalog } from './openapi.js';

export interface ServerOptions {
  readonly logger: Logger;
  readonly trustProxy: boolean;
  readonly store: Store;
  readonly metrics: Metrics;
  readonly tracking: TrackingApiOptions;
  readonly browser: BrowserRoutesOptions;
  readonly admin: AdminRoutesOptions;
  /** How many connections the server holds at once (`SWITCHYARD_MAX_CONNECTIONS`, `SWITCHYARD_MAX_CONNECTIONS_PER_ADDRESS`). */
  readonly connections: ConnectionCaps;
  /** Whether the processing stages run; `/readyz` answers 503 while they do not (absent: always). */
  readonly processing?: () => boolean;
}

/** Slow or endless request bodies are cut off after this long. */
const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How often Node looks for requests past their timeout. With its default,
 * 30 s, a body trickled one chunk a second was cut only after 89 s.
 */
const TIMEOUT_CHECK_MS = 2_000;

/**
 * Per-connection share of the server (see ConnectionGuard). Clients that read
 * their answers send one request at a time; 8 handled at once and 64 waiting
 * is room for any honest pipeline, while a flood is cut within its first
 * 64 KB read. 10 s without the client taking a byte of answers waiting for it
 * is far longer than any network hiccup.
 */
const CONNECTION_LIMITS = { maxInFlight: 8, maxWaiting: 64, stallMs: 10_000, checkEveryMs: 1_000 };

/**
 * How a connection past a cap is refused (see ConnectionAdmission). 1,000
 * answers in the making cost about 1 MB at most; past them a refused
 * connection is closed unanswered. 2 s is several round trips of any
 * network for the client to read its answer before the socket is closed.
 * Retry-After: 5, not the 1 s of a full commit backlog: a slot frees when
 * a connection closes, and an idle keep-alive connection is closed 5 s
 * after its last answer (Node's default keepAliveTimeout; Fastify's 72 s
 * is not applied to a server of serverFactory), so sooner retries mostly
 * make more refusals.
 */
const REFUSAL = { maxAnswering: 1_000, lingerMs: 2_000, retryAfterS: 5 };
/** At most one warning per this long while connections are refused: a flood must not flood the log too. */
const REFUSAL_LOG_EVERY_MS = 10_000;

const OPENAPI_SCHEMA: DocumentedSchema = { summary: 'This OpenAPI 3.1 document (no token needed)', tags: ['meta'] };

const HEALTH_SCHEMAS = documented({
  healthz: { summary: 'The process is up', tags: ['health'], 'x-responses': { 200: { description: '{"status":"ok"}' } } },
  readyz: {
    summary: 'Storage answers and processing runs',
    tags: ['health'],
    'x-responses': { 200: { description: '{"status":"ready"}' }, 503: { description: '{"status":"unavailable","reason":…}' } },
  },
  metrics: { summary: 'Prometheus metrics (text format)', tags: ['health'] },
});

/** The one HTTP server: Tracking API, browser libraries' files, admin API, web console, health and metrics. */
export function buildServer(options: ServerOptions): FastifyInstance {
  // Typed as Fastify's logger so the instance has Fastify's default type parameters.
  const loggerInstance: FastifyBaseLogger = options.logger;
  const tracking = new TrackingApi(options.tracking, { logger: options.logger, trustProxy: options.trustProxy });
  const admission = new ConnectionAdmission({ caps: options.connections, ...REFUSAL }, refusalReporter(options));
  options.metrics.watchOpenConnections(() => admission.open);
  const app = Fastify({
    loggerInstance,
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: options.trustProxy,
    requestTimeout: REQUEST_TIMEOUT_MS,
    bodyLimit: 1024 * 1024,
    // A path parameter may be an id of up to 1,024 bytes of UTF-8, percent-encoded
    // (`GET /admin/v1/profiles/anonymous_id:<id>`: 3 characters a byte); Fastify's default is 100.
    routerOptions: { maxParamLength: 4_096 },
    return503OnClosing: true,
    frameworkErrors: answerPathError,
    // Route schemas validate what the body holds, as JSON: no type coercion,
    // no defaults filled in, nothing removed (the services see what was sent).
    ajv: { customOptions: { coerceTypes: false, useDefaults: false, removeAdditional: false, allowUnionTypes: true } },
    serverFactory: (handler) => {
      const guard = new ConnectionGuard(CONNECTION_LIMITS, (reason) => options.metrics.connectionsCut.inc({ reason }));
      // The Tracking API first, on node:http itself; Fastify gets every other request.
      const route: RequestListener = (request, response) => {
        if (!tracking.take(request, response)) handler(request, response);
      };
      const server = createServer({ requestTimeout: REQUEST_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_MS }, guard.wrap(route));
      guard.attach(server);
      admission.attach(server); // last: it calls the listeners above for admitted connections only
      return server;
    },
  });

  app.addHook('preClose', (done) => {
    tracking.close();
    // Refused connections are closed now, not after their linger: closing waits for every connection.
    admission.stop();
    done();
  });

  const catalog = new RouteCatalog();
  catalog.attach(app);
  for (const route of TRACKING_ROUTES) catalog.add(route.method, route.url, route.schema);
  let openApi: string | undefined;
  // Outside the admin scope: the document needs no token. Built on first use, once every route is registered.
  app.get('/admin/v1/openapi.json', { schema: OPENAPI_SCHEMA }, async (_request, reply) => {
    openApi ??= JSON.stringify(catalog.document(VERSION));
    return reply.header('content-type', 'application/json; charset=utf-8').send(openApi);
  });

  app.get('/healthz', { schema: HEALTH_SCHEMAS.healthz }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: HEALTH_SCHEMAS.readyz }, async (_request, reply) => {
    try {
      await options.store.ping();
      // Ingest alone would acknowledge what nobody processes or delivers: a balancer should look elsewhere.
      if (options.processing !== undefined && !options.processing()) {
        return reply.code(503).send({ status: 'unavailable', reason: 'processing not running' });
      }
      return { status: 'ready' };
    } catch (error) {
      options.logger.warn({ err: error }, 'readiness check: storage unreachable');
      return reply.code(503).send({ status: 'unavailable', reason: 'storage unreachable' });
    }
  });
  app.get('/metrics', { schema: HEALTH_SCHEMAS.metrics }, async (_request, reply) => {
    reply.header('content-type', options.metrics.registry.contentType);
    return options.metrics.render();
  });

  consoleRoutes(app);
  void app.register(notFoundRoutes);
  void app.register(browserRoutes, options.browser);
  void app.register(adminRoutes, { ...options.admin, prefix: '/admin/v1' });
  return app;
}

/** Counts each refused connection, and warns at most every REFUSAL_LOG_EVERY_MS while they are refused (no addresses logged). */
function refusalReporter(options: ServerOptions): (reason: ConnectionRefusal) => void {
  const refusals = new LogThrottle<ConnectionRefusal>(REFUSAL_LOG_EVERY_MS);
  return (reason) => {
    options.metrics.connectionsRefused.inc({ reason });
    const due = refusals.count(reason);
    if (due === undefined) return;
    options.logger.warn(
      { refused: { total: 0, per_address: 0, ...due }, maxConnections: options.connections.total, maxConnectionsPerAddress: options.connections.perAddress },
      'refusing connections with 503: the server, or an address, holds as many connections as it may',
    );
  };
}

/**
 * Any request no route takes (including `/v1` paths and methods the
 * Tracking API does not serve): a 404 in the Tracking API's shape, with its
 * CORS headers so that a browser can read it.
 */
async function notFoundRoutes(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', allowAnyOrigin);
  // Answered before the body is read: a body costs memory, and a request no
  // route takes has no credential to check first (a slow 1 MB body to a
  // path that does not exist was held until the request timed out).
  app.addHook('onRequest', async (request, reply) => {
    if (request.is404) return reply.code(404).send(routeNotFound(request.method, request.url));
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(routeNotFound(request.method, request.url));
  });
}

function routeNotFound(method: string, url: string): { success: false; code: string; message: string } {
  return { success: false, code: 'route_not_found', message: `no route ${method} ${shownPath(url)}` };
}
