import type { FastifySchema } from 'fastify';
import type { ErrorCode } from './errors.js';

/**
 * How a route documents itself for the OpenAPI document (built in
 * http/openapi.ts from the routes as Fastify registers them). Here, below
 * the Tracking API and the admin routes, so that they and the document
 * import it alike. Beside the schema keys Fastify uses, a route's schema may
 * carry:
 * - `summary`, `description`, `tags`: as in OpenAPI;
 * - `x-body`: the request body's JSON Schema when Fastify does not validate
 *   it (the Tracking API reads every content type with its own parser);
 * - `x-responses`: `{status: {description, schema?}}`;
 * - `x-errors`: the error codes the route answers with; their statuses come
 *   from the error table, so a documented code always exists.
 */
export interface RouteDocumentation {
  readonly summary?: string;
  readonly description?: string;
  readonly tags?: readonly string[];
  readonly body?: JsonSchema;
  readonly params?: JsonSchema;
  readonly querystring?: JsonSchema;
  readonly 'x-body'?: JsonSchema;
  readonly 'x-responses'?: Readonly<Record<string, { readonly description: string; readonly schema?: JsonSchema }>>;
  readonly 'x-errors'?: readonly ErrorCode[];
  /** The error code of a validation failure under a top-level body field; `invalid_request` elsewhere. */
  readonly 'x-validation-codes'?: Readonly<Record<string, ErrorCode>>;
  /**
   * Admin routes: the path or query parameters that name an id as a client
   * sent it (a userId, a profile identifier), which may hold U+0000: the
   * route names it as ingest stores it (`storedId`). adminRoutes answers 400
   * for U+0000 in any other parameter.
   */
  readonly 'x-nul-mapped'?: readonly string[];
  /**
   * Admin POSTs whose body is a set of options, every one optional (retry
   * every failed delivery, rotate a secret): no body at all reads as `{}`.
   * Named route by route, never inferred from a schema without `required`:
   * for a body that is a whole object to store (a tracking plan), no body
   * must stay an error, not become an empty one.
   */
  readonly 'x-body-optional'?: true;
}

export type JsonSchema = Readonly<Record<string, unknown>>;

/** A route's schema as Fastify takes it, with its documentation. */
export type DocumentedSchema = FastifySchema & RouteDocumentation;

/** Types a group of route documentations as the schemas Fastify takes. */
export function documented<K extends string>(schemas: Record<K, RouteDocumentation>): Record<K, DocumentedSchema> {
  return schemas;
}
