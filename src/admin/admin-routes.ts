import type { FastifyError, FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import type { AdminAuth } from './admin-auth.js';
import { SOURCE_SCHEMAS } from './route-schemas.js';
import { jsonBoundsError, refuseNul } from './validate.js';
import { validationError } from './validation-errors.js';
import { shownPath } from '../domain/shown-path.js';
import type { RouteDocumentation } from '../route-documentation.js';
import type { SourceAdmin } from './source-admin.js';

export interface AdminRoutesOptions {
  readonly auth: AdminAuth;
  readonly sources: SourceAdmin;
  /** Further route groups (webhooks, deliveries, regulations) registered in the same authenticated scope. */
  readonly extensions?: ReadonlyArray<(app: FastifyInstance) => void>;
}

/** The admin API under `/admin/v1`: bearer-token auth, JSON, `{"error":{code,message}}` errors. */
export async function adminRoutes(app: FastifyInstance, options: AdminRoutesOptions): Promise<void> {
  const { auth, sources } = options;

  app.addHook('onRequest', async (request) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (match === null) throw new ApiError('unauthorized', 'send the admin token as "Authorization: Bearer <token>"');
    if (!(await auth.verify(match[1]!))) throw new ApiError('unauthorized', 'the admin token is wrong');
  });

  // U+0000 in a path or query parameter: 400, before a route looks it up. Ids this API makes never hold
  // one, and PostgreSQL text cannot (the lookup failed with 500 there); a route naming an id as a client
  // sent it (a userId, a profile identifier) lists it in `x-nul-mapped` and maps it as ingest stores it.
  app.addHook('onRequest', async (request) => {
    const mapped = (request.routeOptions.schema as RouteDocumentation | undefined)?.['x-nul-mapped'] ?? [];
    for (const values of [request.params, request.query]) {
      for (const [name, value] of Object.entries((values ?? {}) as Record<string, unknown>)) {
        if (mapped.includes(name)) continue;
        for (const one of Array.isArray(value) ? value : [value]) refuseNul(one, name);
      }
    }
  });

  // A POST whose body is only options may be sent without one (`curl -X POST …/deliveries/retry`, a
  // rotation with the default overlap): it reads as {}, on the routes that say so (`x-body-optional`).
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && (request.routeOptions.schema as RouteDocumentation | undefined)?.['x-body-optional'] === true) request.body = {};
  });

  // JSON whatever the Content-Type (form-encoded, text/plain, none), as the Tracking API reads it:
  // scripts and curl users send all of these. Fastify's body limit still bounds it.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return done(new ApiError('invalid_request', 'the body is not valid JSON'), undefined);
    }
    // At the door, before any recursive walk (schema validation, JSON.stringify, the services).
    const codes = (request.routeOptions.schema as RouteDocumentation | undefined)?.['x-validation-codes'];
    const outOfBounds = jsonBoundsError(parsed, codes);
    if (outOfBounds !== undefined) return done(outOfBounds, undefined);
    done(null, parsed);
  });

  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    let api: ApiError;
    if (error instanceof ApiError) api = error;
    else if (error.validation !== undefined) {
      const schema = request.routeOptions.schema as RouteDocumentation | undefined;
      const validated = error.validationContext === 'querystring' ? schema?.querystring : schema?.body;
      api = validationError(error.validation, error.validationContext, schema?.['x-validation-codes'], validated, error.validationContext === 'querystring' ? request.query : request.body);
    } else if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      api = new ApiError('invalid_request', error.message);
    } else {
      request.log.error({ err: error }, 'admin API error');
      api = new ApiError('internal_error', 'internal error');
    }
    void reply.code(api.statusCode).send({ error: { code: api.code, message: api.message } });
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ error: { code: 'route_not_found', message: `no route ${request.method} ${shownPath(request.url)}` } });
  });

  app.post('/sources', { schema: SOURCE_SCHEMAS.create }, async (request, reply) => reply.code(201).send(await sources.create(request.body)));
  app.get('/sources', { schema: SOURCE_SCHEMAS.list }, async () => ({ sources: await sources.list() }));
  app.get<{ Params: { id: string } }>('/sources/:id', { schema: SOURCE_SCHEMAS.get }, async (request) => sources.get(request.params.id));
  app.patch<{ Params: { id: string } }>('/sources/:id', { schema: SOURCE_SCHEMAS.update }, async (request) => sources.update(request.params.id, request.body));
  app.delete<{ Params: { id: string } }>('/sources/:id', { schema: SOURCE_SCHEMAS.delete }, async (request, reply) => {
    await sources.delete(request.params.id);
    return reply.code(204).send();
  });

  for (const extend of options.extensions ?? []) extend(app);
}
