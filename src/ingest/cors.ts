import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/**
 * Request headers a browser may send to the Tracking API and the browser
 * routes, lower case. Each is one a known client sends:
 * - analytics.js: `content-type`, `x-retry-count`, and `authorization` when
 *   a site adds Basic auth;
 * - RudderStack's JS SDK v3: `authorization`, `content-type`, `accept`,
 *   `anonymousid`, `sentat`, and on a retry the `rsa-*` ones. A preflight
 *   that leaves one of them out makes the browser drop the request, and the
 *   SDK its events.
 */
export const ALLOWED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'anonymousid',
  'authorization',
  'content-encoding',
  'content-type',
  'rsa-recovered',
  'rsa-retry-attempt',
  'rsa-retry-reason',
  'rsa-since-first-attempt',
  'rsa-since-last-attempt',
  'sentat',
  'x-retry-count',
]);

/** Every allowed header, for a preflight that names none. */
const ALL_ALLOWED = [...ALLOWED_REQUEST_HEADERS].join(', ');
/** Longest `Access-Control-Request-Headers` read; the allow-list joined is far shorter. */
const MAX_REQUESTED_LENGTH = 1_024;
/** Browsers cache a preflight at most this long (Chromium caps it at 2 hours). */
const PREFLIGHT_MAX_AGE_S = '86400';

/**
 * The headers to allow in answer to a preflight: those requested that are on
 * the allow-list (echoed, so the answer names exactly what was asked), or the
 * whole list when none were named or the request is too long to read. A
 * header off the list is left out and the browser refuses the request.
 */
export function allowedHeadersFor(requested: string | undefined): string {
  if (requested === undefined || requested.trim() === '' || requested.length > MAX_REQUESTED_LENGTH) return ALL_ALLOWED;
  const allowed = requested
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => ALLOWED_REQUEST_HEADERS.has(name));
  return [...new Set(allowed)].join(', ');
}

/**
 * The headers that let any origin call (websites on any domain send here),
 * with credentials, as Segment's API does.
 */
export function anyOriginHeaders(origin: string | undefined): Readonly<Record<string, string>> {
  return origin === undefined ? ANY_ORIGIN : { 'access-control-allow-origin': origin, 'access-control-allow-credentials': 'true', vary: 'Origin' };
}
const ANY_ORIGIN: Readonly<Record<string, string>> = { 'access-control-allow-origin': '*' };

/** The headers of a CORS preflight's answer for routes taking `methods` (answered 204). */
export function preflightHeaders(requested: string | string[] | undefined, methods: string): Readonly<Record<string, string>> {
  return {
    'access-control-allow-methods': methods,
    'access-control-allow-headers': allowedHeadersFor(typeof requested === 'string' ? requested : undefined),
    'access-control-max-age': PREFLIGHT_MAX_AGE_S,
    vary: 'Origin, Access-Control-Request-Headers',
  };
}

/** onRequest hook of the Fastify routes that browsers call: {@link anyOriginHeaders}. */
export function allowAnyOrigin(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  void reply.headers(anyOriginHeaders(request.headers.origin));
  done();
}

/** Answers a CORS preflight for routes taking `methods`. */
export function answerPreflight(request: FastifyRequest, reply: FastifyReply, methods: string): void {
  void reply.headers(preflightHeaders(request.headers['access-control-request-headers'], methods)).code(204).send();
}
