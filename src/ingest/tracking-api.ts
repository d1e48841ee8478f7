import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { anonymousIdFromHeader } from '../domain/browser-settings.js';
import { clientAddress, proxiedPeer, shareKey } from '../domain/client-address.js';
import { type CallType, LIMITS, type JsonObject, isJsonObject } from '../domain/message.js';
import { ApiError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { DocumentedSchema } from '../route-documentation.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import { NO_SPAN, type TraceSpan, type Tracing } from '../telemetry/tracing.js';
import { checkBatch } from './build-entries.js';
import { anyOriginHeaders, preflightHeaders } from './cors.js';
import { BacklogFullError, type GroupCommitter } from './group-commit.js';
import type { ProcessingBacklog } from './processing-backlog.js';
import { BodyBudget } from './body-budget.js';
import { LogThrottle } from '../util/log-throttle.js';
import { BodyBudgetExceeded } from './read-body.js';
import { type BodyConfig, discardRestOfBody, readParsedBody } from './tracking-body.js';
import { BROWSER_SCHEMAS, METRICS_SCHEMA, batchSchema, callSchema } from './tracking-schemas.js';
import { writeKeyFromAuthorization } from './write-key.js';

export interface TrackingApiOptions {
  readonly directory: SourceDirectory;
  readonly committer: GroupCommitter;
  /** Raw requests stored but not yet processed into messages: the second admission bound. */
  readonly unprocessed: ProcessingBacklog;
  /** The config version of the suppressions ingest holds (stored with each raw request; see `raw-processor.ts`). */
  readonly suppressionsVersion: () => number;
  readonly metrics: Metrics;
  readonly now: () => number;
  /** Off (NO_TRACING): no span, nothing stored. On: a span per request, its traceparent stored with the raw request. */
  readonly tracing: Tracing;
}

/** What the server around the Tracking API gives it: its logger and whether client addresses come from X-Forwarded-For. */
export interface TrackingServerContext {
  readonly logger: Logger;
  readonly trustProxy: boolean;
}

interface Route {
  readonly path: string;
  readonly kind: CallType | 'batch' | 'client-metrics';
  readonly body: BodyConfig;
  /** RudderStack's beacon: navigator.sendBeacon sets no headers, so the write key comes in the query. */
  readonly writeKeyInQuery: boolean;
  readonly schema: DocumentedSchema;
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

const CALL_BODY: BodyConfig = { bodyLimit: LIMITS.callBytes };
const BATCH_BODY: BodyConfig = { bodyLimit: LIMITS.batchBytes };

/** Every POST route of the Tracking API, by path. */
const ROUTES: ReadonlyMap<string, Route> = new Map(
  ([
    ...CALL_PATHS.map(([path, type]): Route => ({ path: `/v1/${path}`, kind: type, body: CALL_BODY, writeKeyInQuery: false, schema: callSchema(type, path) })),
    ...BATCH_PATHS.map((path): Route => ({ path: `/v1/${path}`, kind: 'batch', body: BATCH_BODY, writeKeyInQuery: false, schema: batchSchema(path) })),
    // RudderStack's JS SDK in beacon mode (see docs: the write key is public
    // in the page anyway, and request URLs are not logged).
    { path: '/beacon/v1/batch', kind: 'batch', body: BATCH_BODY, writeKeyInQuery: true, schema: BROWSER_SCHEMAS.beacon },
    // Client-side metrics from analytics.js: accepted and ignored.
    { path: '/v1/m', kind: 'client-metrics', body: { bodyLimit: LIMITS.callBytes, ignoreBody: true }, writeKeyInQuery: false, schema: METRICS_SCHEMA },
  ] satisfies Route[]).map((route) => [route.path, route]),
);

/** The Tracking API's routes, for the OpenAPI document. */
export const TRACKING_ROUTES: ReadonlyArray<{ readonly method: 'post'; readonly url: string; readonly schema: DocumentedSchema }> = [...ROUTES.values()].map((route) => ({
  method: 'post',
  url: route.path,
  schema: route.schema,
}));

const SUCCESS = '{"success":true}';
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Retry-After of an `overloaded` answer. The backlog bound is under a
 * second of commits (see serve.ts), so by then it has room again.
 */
const OVERLOADED_RETRY_AFTER_S = '1';
/** At most one warning per this long while ingest refuses requests: a flood must not flood the log too. */
const OVERLOAD_LOG_EVERY_MS = 10_000;

/**
 * Bytes of request bodies read at once, in all and from one client address
 * (see {@link BodyBudget}). 64 MB is 128 batches at the 500 KB limit, and
 * 16 MB from one address is 32 of them: a server library flushes a few
 * batches at a time per process, and a load test of 64 connections sending
 * 60 KB batches holds under 4 MB.
 */
export const BODY_BUDGET = { totalBytes: 64 * 1024 * 1024, perClientBytes: 16 * 1024 * 1024 } as const;

/**
 * The Tracking API (`/v1/*` and RudderStack's beacon), served straight on
 * `node:http`, ahead of Fastify: it is the one path every message takes, and
 * a framework's per-request work (routing, hooks, request and reply objects)
 * cost about a quarter of a bare server's time per call. The rest of the
 * server (admin API, console, browser files, health) stays on Fastify, which
 * also answers any `/v1` request this does not take (404s, other methods).
 *
 * Every content type is read as JSON (browsers send text/plain, RudderStack's
 * SDK x-www-form-urlencoded); errors have the Tracking API's shape,
 * `{"success":false,"code":…,"message":…}`.
 */
export class TrackingApi {
  private closing = false;
  /** Requests refused with 503 overloaded (either bound), logged at most every OVERLOAD_LOG_EVERY_MS. */
  private readonly refusals: LogThrottle<'refused'>;
  private readonly bodies = new BodyBudget(BODY_BUDGET.totalBytes, BODY_BUDGET.perClientBytes);

  constructor(
    private readonly options: TrackingApiOptions,
    private readonly server: TrackingServerContext,
  ) {
    this.refusals = new LogThrottle(OVERLOAD_LOG_EVERY_MS, options.now);
    options.metrics.watchBodiesReading(() => this.bodies.reserved);
  }

  /**
   * Takes the request when it is the Tracking API's (a POST to one of its
   * routes, or a CORS preflight under `/v1/` or `/beacon/`) and answers it;
   * false leaves it to the rest of the server.
   */
  take(request: IncomingMessage, response: ServerResponse): boolean {
    const url = request.url ?? '';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    if (request.method === 'POST') {
      const route = ROUTES.get(path);
      if (route === undefined) return false;
      void this.serve(route, request, response, query === -1 ? '' : url.slice(query + 1));
      return true;
    }
    if (request.method === 'OPTIONS' && (path.startsWith('/v1/') || path.startsWith('/beacon/'))) {
      this.options.metrics.ingestRequests.inc({ code: '204' });
      response.writeHead(204, { ...anyOriginHeaders(request.headers.origin), ...preflightHeaders(request.headers['access-control-request-headers'], 'POST, OPTIONS') });
      response.end();
      return true;
    }
    return false;
  }

  /** From now on every request is answered 503 with `Connection: close` (the server is closing). */
  close(): void {
    this.closing = true;
  }

  private async serve(route: Route, request: IncomingMessage, response: ServerResponse, query: string): Promise<void> {
    const { tracing } = this.options;
    // Client metrics store nothing: no span, and no admission bound to refuse them by.
    const stores = route.kind !== 'client-metrics';
    const span = stores && tracing.enabled ? startRequestSpan(tracing, request, route.path) : NO_SPAN;
    for (const [name, value] of Object.entries(anyOriginHeaders(request.headers.origin))) response.setHeader(name, value);
    const forwardedFor = this.server.trustProxy ? request.headers['x-forwarded-for'] : undefined;
    const ip = clientAddress(request.socket.remoteAddress, forwardedFor);
    const reservation = this.bodies.open(shareKey(proxiedPeer(request.socket.remoteAddress, forwardedFor)));
    try {
      if (this.closing) {
        response.setHeader('connection', 'close');
        response.setHeader('retry-after', OVERLOADED_RETRY_AFTER_S);
        throw new ApiError('overloaded', 'the server is shutting down; nothing was stored, retry later');
      }
      // Before the body is read and parsed: under a flood, refusing must cost
      // less than accepting, or the refusals themselves starve the event loop.
      const { committer, unprocessed } = this.options;
      if (stores && (committer.full || unprocessed.full)) throw this.overloaded(response);
      const body = await readParsedBody(request, route.body, reservation);
      if (stores) {
        if (body === null) throw new ApiError('invalid_json', 'the body is empty; send a JSON object');
        await this.store(route, request, response, query, ip, body, span);
      }
      this.answer(response, 200, SUCCESS, span);
    } catch (error) {
      this.fail(request, response, error instanceof BodyBudgetExceeded ? this.noRoomForBody(request, response, error) : error, span);
    } finally {
      // Held until answered: the text of a stored body is the commit's until then.
      reservation.release();
    }
  }

  private async store(
    route: Route,
    request: IncomingMessage,
    response: ServerResponse,
    query: string,
    ip: string | undefined,
    { value: body, bytes, text }: { value: JsonObject; bytes: number; text: string },
    span: TraceSpan,
  ): Promise<void> {
    const { directory, committer, unprocessed, now } = this.options;
    const writeKey =
      (route.writeKeyInQuery ? writeKeyFromQuery(query) : undefined) ?? writeKeyFromAuthorization(singleHeader(request.headers.authorization)) ?? writeKeyFromBody(body);
    const source = writeKey === undefined ? undefined : directory.byWriteKey(writeKey);
    if (source === undefined) {
      const where = route.writeKeyInQuery ? 'in the query (?writeKey=…)' : 'as Basic auth or as "writeKey" in the body';
      throw new ApiError('invalid_write_key', writeKey === undefined ? `no write key: send it ${where}` : 'unknown write key');
    }
    // The whole-body checks that answer 400 come before storing; every
    // per-message rule runs after the 200, in the processing stage.
    const anonymousId = anonymousIdFromHeader(singleHeader(request.headers['anonymousid']));
    const sentAt = singleHeader(request.headers['sentat']);
    const receivedAt = now();
    const messageCount = route.kind === 'batch' ? checkBatch(body, bytes, text, { receivedAt, ip, headers: { anonymousId, sentAt } }) : 1;
    span.setAttribute('switchyard.source.id', source.id);
    span.setAttribute('switchyard.message.count', messageCount);
    if (messageCount === 0) return;
    // Stored with the raw request: processing's span and the deliveries' join this trace.
    const traceparent = span.traceparent;
    try {
      await committer.commit({
        sourceId: source.id,
        route: route.kind === 'batch' ? 'batch' : route.kind,
        receivedAt,
        ip,
        configVersion: Math.max(directory.configVersion, this.options.suppressionsVersion()),
        messageCount,
        headers: anonymousId === undefined && sentAt === undefined && traceparent === undefined ? undefined : JSON.stringify({ anonymousId, sentAt, traceparent }),
        body: text,
      });
    } catch (error) {
      if (error instanceof BacklogFullError) throw this.overloaded(response);
      this.server.logger.error({ err: error }, 'could not store messages');
      response.setHeader('retry-after', '5');
      throw new ApiError('storage_unavailable', 'the messages could not be stored; retry later', { cause: error });
    }
    unprocessed.added(messageCount);
  }

  private overloaded(response: ServerResponse): ApiError {
    const due = this.refusals.count('refused');
    if (due !== undefined) {
      this.server.logger.warn(
        { backlog: this.options.committer.backlog, unprocessed: this.options.unprocessed.messages, refused: due.refused },
        'ingest overloaded: refusing requests with 503 until the commit backlog or the processing backlog drains',
      );
    }
    response.setHeader('retry-after', OVERLOADED_RETRY_AFTER_S);
    return new ApiError('overloaded', 'the server is busy storing earlier messages; nothing was stored, retry later');
  }

  /** A body refused for want of room in the {@link BodyBudget}: 503 at once. */
  private noRoomForBody(request: IncomingMessage, response: ServerResponse, error: BodyBudgetExceeded): ApiError {
    const due = this.refusals.count('refused');
    if (due !== undefined) {
      this.server.logger.warn(
        { bound: error.bound, reading: this.bodies.reserved, refused: due.refused },
        error.bound === 'client'
          ? 'ingest refusing requests with 503: one client address is sending more request bodies at once than its share'
          : 'ingest refusing requests with 503: request bodies being read at once are at their bound',
      );
    }
    // What the client still sends is read and dropped, not kept (see discardRestOfBody), so that it gets this answer.
    response.once('finish', () => discardRestOfBody(request));
    response.setHeader('retry-after', OVERLOADED_RETRY_AFTER_S);
    return new ApiError(
      'overloaded',
      error.bound === 'client'
        ? 'too many request bodies are being read from this address at once; nothing was stored, retry later'
        : 'too many request bodies are being read at once; nothing was stored, retry later',
    );
  }

  private fail(request: IncomingMessage, response: ServerResponse, error: unknown, span: TraceSpan): void {
    const api = error instanceof ApiError ? error : new ApiError('internal_error', 'internal error', { cause: error });
    if (api.statusCode >= 500 && api.code !== 'storage_unavailable' && api.code !== 'overloaded') this.server.logger.error({ err: error, url: pathOf(request) }, 'tracking API error');
    // The rest of a refused body is read and dropped, so that the client,
    // still sending, gets its answer (see discardRestOfBody).
    if (api.code === 'body_too_large' || api.code === 'invalid_encoding') response.once('finish', () => discardRestOfBody(request));
    this.answer(response, api.statusCode, JSON.stringify({ success: false, code: api.code, message: api.message }), span);
  }

  private answer(response: ServerResponse, status: number, body: string, span: TraceSpan): void {
    this.options.metrics.ingestRequests.inc({ code: String(status) });
    span.setAttribute('http.response.status_code', status);
    // A server span fails on 5xx only: a 4xx is the client's mistake, answered as designed.
    if (status >= 500) span.fail(`HTTP ${status}`);
    span.end();
    if (response.headersSent || response.destroyed) return;
    response.statusCode = status;
    response.setHeader('content-type', JSON_TYPE);
    response.end(body);
  }
}

/**
 * The span of one Tracking API request, a child of the client's
 * `traceparent` when it sent a valid one (an invalid or over-long one
 * starts a new trace, as the W3C spec says).
 */
function startRequestSpan(tracing: Tracing, request: IncomingMessage, route: string): TraceSpan {
  return tracing.startSpan(`POST ${route}`, {
    kind: 'server',
    parent: singleHeader(request.headers['traceparent']),
    attributes: { 'http.request.method': 'POST', 'http.route': route },
  });
}

/** The `writeKey` of a query string, when it has exactly one. */
function writeKeyFromQuery(query: string): string | undefined {
  if (query === '') return undefined;
  const values = new URLSearchParams(query).getAll('writeKey');
  return values.length === 1 && values[0] !== '' ? values[0] : undefined;
}

/** A header sent once; a repeated one (Node joins most with ", ") is still one string. */
function singleHeader(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** A request's path without its query (which may hold a write key: never logged). */
function pathOf(request: IncomingMessage): string {
  return (request.url ?? '').split('?')[0]!;
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
