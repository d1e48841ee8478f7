import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { anonymousIdFromHeader } from '../domain/browser-settings.js';
import { type CallType, LIMITS, type JsonObject, isJsonObject } from '../domain/message.js';
import { ApiError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { TraceSpan, Tracing } from '../telemetry/tracing.js';
import { checkBatch } from './build-entries.js';
import { BacklogFullError, type GroupCommitter } from './group-commit.js';
import type { ProcessingBacklog } from './processing-backlog.js';
import { allowAnyOrigin, answerPreflight } from './cors.js';
import { type BodyConfig, type ParsedBody, discardRestOfBody, readParsedBody } from './tracking-body.js';
import { BROWSER_SCHEMAS, METRICS_SCHEMA, batchSchema, callSchema } from './tracking-schemas.js';
import { writeKeyFromAuthorization } from './write-key.js';

export interface TrackingRoutesOptions {
  readonly directory: SourceDirectory;
  readonly committer: GroupCommitter;
  /** Raw requests stored but not yet processed into messages: the second admission bound. */
  readonly unprocessed: ProcessingBacklog;
  /** The config version of the suppressions ingest holds (stored with each raw request; see `raw-processor.ts`). */
  readonly suppressionsVersion: () => number;
  readonly metrics: Metrics;
  readonly now: () => number;
  /** Off (NO_TRACING): no span, no hook, nothing stored. On: a span per request, its traceparent stored with the raw request. */
  readonly tracing: Tracing;
}

/** Every path of a single call, long and short (browser and mobile libraries use the short ones). */
const CALL_PATHS: ReadonlyArray<readonly [string, CallType]> = [
  ['identify', 'identify'], ['i', 'identify'],
  ['track', 'track'], ['t', 'track'],
  ['page', 'page'], ['p', 'page'],
  ['screen', 'screen'], ['s', 'screen'],
  ['group', 'group'], ['g', 'group'],
  ['alias', 'alias'], ['a', 'alias'],
];
const BATCH_PATHS = ['batch', 'b', 'import'];

const SUCCESS = '{"success":true}';

/**
 * Retry-After of an `overloaded` answer. The backlog bound is under a
 * second of commits (see serve.ts), so by then it has room again.
 */
const OVERLOADED_RETRY_AFTER_S = '1';
/** At most one warning per this long while ingest refuses requests: a flood must not flood the log too. */
const OVERLOAD_LOG_EVERY_MS = 10_000;

/**
 * The Tracking API, `/v1/*`. Encapsulated: its body parser reads every
 * content type as JSON (browsers send text/plain, RudderStack's SDK
 * x-www-form-urlencoded), and its errors have the Tracking API's shape.
 */
export async function trackingRoutes(app: FastifyInstance, options: TrackingRoutesOptions): Promise<void> {
  const { directory, committer, unprocessed, metrics, now } = options;
  let overloadLoggedAt = -Infinity;
  let refusedSinceLog = 0;
  const overloaded = (request: FastifyRequest, reply: FastifyReply): ApiError => {
    refusedSinceLog++;
    const at = now();
    if (at - overloadLoggedAt >= OVERLOAD_LOG_EVERY_MS) {
      request.log.warn(
        { backlog: committer.backlog, unprocessed: unprocessed.messages, refused: refusedSinceLog },
        'ingest overloaded: refusing requests with 503 until the commit backlog or the processing backlog drains',
      );
      overloadLoggedAt = at;
      refusedSinceLog = 0;
    }
    reply.header('retry-after', OVERLOADED_RETRY_AFTER_S);
    return new ApiError('overloaded', 'the server is busy storing earlier messages; nothing was stored, retry later');
  };
  // Before the body is read and parsed: under a flood, refusing must cost
  // less than accepting, or the refusals themselves starve the event loop.
  const { tracing } = options;
  /** The span of each traced request, from admission to the answer. */
  const spans = new WeakMap<FastifyRequest, TraceSpan>();
  const admit = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void => {
    if (tracing.enabled) spans.set(request, startRequestSpan(tracing, request));
    if (committer.full || unprocessed.full) done(overloaded(request, reply));
    else done();
  };

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, _payload, done) => {
    const config = request.routeOptions.config as unknown as BodyConfig;
    readParsedBody(request.raw, config).then(
      (body) => done(null, body),
      (error: unknown) => done(error as Error),
    );
  });

  // Callback-style hooks: cheaper than async ones on every request.
  app.addHook('onRequest', allowAnyOrigin);
  app.addHook('onResponse', (_request, reply, done) => {
    metrics.ingestRequests.inc({ code: String(reply.statusCode) });
    done();
  });
  if (tracing.enabled) {
    app.addHook('onResponse', (request, reply, done) => {
      const span = spans.get(request);
      if (span !== undefined) {
        span.setAttribute('http.response.status_code', reply.statusCode);
        // A server span fails on 5xx only: a 4xx is the client's mistake, answered as designed.
        if (reply.statusCode >= 500) span.fail(`HTTP ${reply.statusCode}`);
        span.end();
      }
      done();
    });
  }

  app.options('/v1/*', async (request, reply) => answerPreflight(request, reply, 'POST, OPTIONS'));
  app.options('/beacon/*', async (request, reply) => answerPreflight(request, reply, 'POST, OPTIONS'));

  const handle = async (request: FastifyRequest, reply: FastifyReply, type: CallType | 'batch', writeKeyInQuery = false): Promise<void> => {
    // Fastify skips the parser for a declared empty body.
    if (request.body === undefined || request.body === null) throw new ApiError('invalid_json', 'the body is empty; send a JSON object');
    const { value: body, bytes, text } = request.body as ParsedBody;
    const writeKey =
      (writeKeyInQuery ? writeKeyFromQuery(request.query) : undefined) ?? writeKeyFromAuthorization(request.headers.authorization) ?? writeKeyFromBody(body);
    const source = writeKey === undefined ? undefined : directory.byWriteKey(writeKey);
    if (source === undefined) {
      const where = writeKeyInQuery ? 'in the query (?writeKey=…)' : 'as Basic auth or as "writeKey" in the body';
      throw new ApiError('invalid_write_key', writeKey === undefined ? `no write key: send it ${where}` : 'unknown write key');
    }
    // The whole-body checks that answer 400 come before storing; every
    // per-message rule runs after the 200, in the processing stage.
    const anonymousId = anonymousIdFromHeader(singleHeader(request.headers['anonymousid']));
    const sentAt = singleHeader(request.headers['sentat']);
    const receivedAt = now();
    const messageCount = type === 'batch' ? checkBatch(body, bytes, text, { receivedAt, ip: request.ip, headers: { anonymousId, sentAt } }) : 1;
    const span = spans.get(request);
    span?.setAttribute('switchyard.source.id', source.id);
    span?.setAttribute('switchyard.message.count', messageCount);
    // Stored with the raw request: processing's span and the deliveries' join this trace.
    const traceparent = span?.traceparent;
    if (messageCount === 0) {
      reply.header('content-type', 'application/json; charset=utf-8').send(SUCCESS);
      return;
    }
    try {
      await committer.commit({
        sourceId: source.id,
        route: type,
        receivedAt,
        ip: request.ip,
        configVersion: Math.max(directory.configVersion, options.suppressionsVersion()),
        messageCount,
        headers: anonymousId === undefined && sentAt === undefined && traceparent === undefined ? undefined : JSON.stringify({ anonymousId, sentAt, traceparent }),
        body: text,
      });
    } catch (error) {
      if (error instanceof BacklogFullError) throw overloaded(request, reply);
      request.log.error({ err: error }, 'could not store messages');
      reply.header('retry-after', '5');
      throw new ApiError('storage_unavailable', 'the messages could not be stored; retry later', { cause: error });
    }
    unprocessed.added(messageCount);
    reply.header('content-type', 'application/json; charset=utf-8').send(SUCCESS);
  };

  const call: BodyConfig = { bodyLimit: LIMITS.callBytes };
  const batch: BodyConfig = { bodyLimit: LIMITS.batchBytes };
  for (const [path, type] of CALL_PATHS) {
    app.post(`/v1/${path}`, { config: call, onRequest: admit, schema: callSchema(type, path) }, (request, reply) => handle(request, reply, type));
  }
  for (const path of BATCH_PATHS) {
    app.post(`/v1/${path}`, { config: batch, onRequest: admit, schema: batchSchema(path) }, (request, reply) => handle(request, reply, 'batch'));
  }
  // RudderStack's JS SDK in beacon mode: navigator.sendBeacon sets no
  // headers, so the write key comes in the query (see docs: it is public
  // in the page anyway, and request URLs are not logged).
  app.post('/beacon/v1/batch', { config: batch, onRequest: admit, schema: BROWSER_SCHEMAS.beacon }, (request, reply) => handle(request, reply, 'batch', true));
  // Client-side metrics from analytics.js: accepted and ignored.
  app.post('/v1/m', { config: { bodyLimit: LIMITS.callBytes, ignoreBody: true } satisfies BodyConfig, schema: METRICS_SCHEMA }, async (_request, reply) => {
    reply.header('content-type', 'application/json; charset=utf-8').send(SUCCESS);
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ success: false, code: 'route_not_found', message: `no route ${request.method} ${request.url.split('?')[0]}` });
  });
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    const api = toApiError(error);
    if (api.statusCode >= 500 && api.code !== 'storage_unavailable' && api.code !== 'overloaded') request.log.error({ err: error }, 'tracking API error');
    if (api.code === 'body_too_large' || api.code === 'invalid_encoding') {
      // Fastify asks for Connection: close after a parser error, which makes
      // Node close at once; linger instead (see discardRestOfBody).
      reply.removeHeader('connection');
      reply.raw.once('finish', () => discardRestOfBody(request.raw));
    }
    void reply.code(api.statusCode).send({ success: false, code: api.code, message: api.message });
  });
}

/**
 * The span of one Tracking API request, a child of the client's
 * `traceparent` when it sent a valid one (an invalid or over-long one
 * starts a new trace, as the W3C spec says).
 */
function startRequestSpan(tracing: Tracing, request: FastifyRequest): TraceSpan {
  const route = request.routeOptions.url ?? request.url.split('?')[0];
  return tracing.startSpan(`POST ${route}`, {
    kind: 'server',
    parent: singleHeader(request.headers['traceparent']),
    attributes: { 'http.request.method': 'POST', 'http.route': route },
  });
}

/** The `writeKey` of a query string, when it has exactly one. */
function writeKeyFromQuery(query: unknown): string | undefined {
  if (typeof query !== 'object' || query === null) return undefined;
  const value = (query as Record<string, unknown>)['writeKey'];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** A header sent once; a repeated one (Node joins most with ", ") is still one string. */
function singleHeader(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * The write key in a body: at its top level or, since analytics.js puts it
 * in each event it batches, in one of the first batch elements.
 */
function writeKeyFromBody(body: JsonObject): string | undefined {
  if (typeof body['writeKey'] === 'string') return body['writeKey'];
  const batch = body['batch'];
  if (!Array.isArray(batch)) return undefined;
  for (const element of batch.slice(0, 10)) {
    if (isJsonObject(element) && typeof element['writeKey'] === 'string') return element['writeKey'];
  }
  return undefined;
}

function toApiError(error: FastifyError | ApiError): ApiError {
  if (error instanceof ApiError) return error;
  const status = error.statusCode ?? 500;
  if (status === 413) return new ApiError('body_too_large', error.message);
  if (status === 415) return new ApiError('unsupported_encoding', error.message);
  if (status >= 400 && status < 500) return new ApiError('invalid_json', error.message);
  return new ApiError('internal_error', 'internal error', { cause: error });
}
