/**
 * The OpenAPI 3.1 document of the Tracking API and the admin API, built from
 * the routes as Fastify registers them: every route is in it by
 * construction, and each route's own `schema` (the one Fastify validates its
 * body with, with the documentation keys of route-documentation.ts)
 * describes it.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { ErrorCode } from '../errors.js';
import { ERROR_CODES } from '../errors.js';
import type { JsonSchema, RouteDocumentation } from '../route-documentation.js';

interface CollectedRoute {
  readonly method: string;
  readonly url: string;
  readonly schema: RouteDocumentation | undefined;
}

/** Records every route registered after {@link attach}, for the document. */
export class RouteCatalog {
  private readonly routes: CollectedRoute[] = [];

  /** Call on the root instance before registering routes: onRoute hooks reach child plugins too. */
  attach(app: FastifyInstance): void {
    app.addHook('onRoute', (route: RouteOptions) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        // HEAD routes are Fastify's automatic twins of GET; wildcards are CORS preflights.
        if (method === 'HEAD' || route.url.includes('*')) continue;
        this.routes.push({ method: method.toLowerCase(), url: route.url, schema: route.schema as RouteDocumentation | undefined });
      }
    });
  }

  /** Records a route served outside Fastify (the Tracking API). */
  add(method: string, url: string, schema: RouteDocumentation): void {
    this.routes.push({ method, url, schema });
  }

  /** The OpenAPI document of the routes registered so far. */
  document(version: string): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const route of [...this.routes].sort((a, b) => (a.url === b.url ? a.method.localeCompare(b.method) : a.url.localeCompare(b.url)))) {
      const { path, parameters } = openApiPath(route.url);
      (paths[path] ??= {})[route.method] = operation(route, parameters);
    }
    return {
      openapi: '3.1.0',
      info: {
        title: 'Switchyard',
        version,
        description: 'Self-hosted, Segment-compatible event collector: the Tracking API (/v1) and the admin API (/admin/v1).',
      },
      components: {
        securitySchemes: {
          writeKey: { type: 'http', scheme: 'basic', description: 'The write key as the user name, no password; or "writeKey" in the body.' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'The admin token.' },
        },
        schemas: {
          TrackingError: {
            type: 'object',
            required: ['success', 'code', 'message'],
            properties: { success: { const: false }, code: { type: 'string' }, message: { type: 'string' } },
          },
          AdminError: {
            type: 'object',
            required: ['error'],
            properties: { error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } } },
          },
        },
      },
      paths,
    };
  }
}

/** `/sources/:id` → `/sources/{id}` and its path parameters. */
function openApiPath(url: string): { path: string; parameters: string[] } {
  const parameters: string[] = [];
  const path = url.replace(/:([A-Za-z0-9_]+)/g, (_match, name: string) => {
    parameters.push(name);
    return `{${name}}`;
  });
  return { path, parameters };
}

function operation(route: CollectedRoute, pathParameters: readonly string[]): Record<string, unknown> {
  const schema = route.schema ?? {};
  const admin = route.url.startsWith('/admin/v1/') && route.url !== '/admin/v1/openapi.json';
  // Everything outside the admin API answers errors in the Tracking API's shape.
  const tracking = !route.url.startsWith('/admin/');
  const parameters: unknown[] = pathParameters.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
  const query = schema.querystring as { properties?: Record<string, JsonSchema>; required?: string[] } | undefined;
  for (const [name, property] of Object.entries(query?.properties ?? {})) {
    parameters.push({ name, in: 'query', required: query?.required?.includes(name) ?? false, schema: property });
  }
  const body = schema.body ?? schema['x-body'];
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries(schema['x-responses'] ?? { 200: { description: 'OK' } })) {
    responses[status] = response.schema === undefined ? { description: response.description } : { description: response.description, content: { 'application/json': { schema: response.schema } } };
  }
  // Every admin route with path or query parameters answers 400 invalid_request for U+0000 in one (see adminRoutes).
  const refusesNul = admin && parameters.length > 0 && !(schema['x-errors'] ?? []).includes('invalid_request');
  const errors = [...(schema['x-errors'] ?? []), ...(refusesNul ? (['invalid_request'] as const) : []), ...(admin ? (['unauthorized'] as const) : [])];
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errors) byStatus.set(ERROR_CODES[code], [...(byStatus.get(ERROR_CODES[code]) ?? []), code]);
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status)] = {
      description: `Error codes: ${codes.join(', ')} (see docs/errors.md)`,
      content: { 'application/json': { schema: { $ref: `#/components/schemas/${tracking ? 'TrackingError' : 'AdminError'}` } } },
      'x-error-codes': codes,
    };
  }
  return {
    operationId: `${route.method}${route.url.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
    ...(schema.summary !== undefined && { summary: schema.summary }),
    ...(schema.description !== undefined && { description: schema.description }),
    ...(schema.tags !== undefined && { tags: schema.tags }),
    ...(admin && { security: [{ adminToken: [] }] }),
    ...(route.url.startsWith('/v1/') && route.method === 'post' && route.url !== '/v1/m' && { security: [{ writeKey: [] }, {}] }),
    ...(parameters.length > 0 && { parameters }),
    ...(body !== undefined && { requestBody: { required: schema['x-body-optional'] !== true, content: { 'application/json': { schema: body } } } }),
    responses,
  };
}
