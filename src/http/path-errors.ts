import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorCode, ERROR_CODES } from '../errors.js';
import { originForm, shownPath } from '../domain/shown-path.js';
import { anyOriginHeaders } from '../ingest/cors.js';

/**
 * Fastify's `frameworkErrors`: what its router refuses before any route
 * runs (a path that is not valid percent-encoding, a path parameter over
 * `maxParamLength`), answered in the shape of the API the path belongs to,
 * the admin API's under `/admin/` (in an absolute-form target too), the
 * Tracking API's (with its CORS headers) elsewhere. Fastify's own answer
 * had a shape of its own and repeated the whole path.
 */
export function answerPathError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const path = originForm(request.url);
  const [code, message]: [ErrorCode, string] =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? ['path_too_long', `a part of the path ${shownPath(path)} is longer than the 4,096 characters a path parameter may have`]
      : ['invalid_path', `the path ${shownPath(path)} is not valid percent-encoding`];
  void reply.code(ERROR_CODES[code]);
  if (path.startsWith('/admin/')) {
    void reply.send({ error: { code, message } });
    return;
  }
  void reply.headers(anyOriginHeaders(request.headers.origin)).send({ success: false, code, message });
}
