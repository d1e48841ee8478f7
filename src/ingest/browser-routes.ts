import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { publicBaseUrl, rudderSourceConfig, segmentSettings } from '../domain/browser-settings.js';
import { ApiError } from '../errors.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { SourceRecord } from '../store/store.js';
import { allowAnyOrigin, answerPreflight } from './cors.js';
import { writeKeyFromAuthorization } from './write-key.js';
import { BROWSER_SCHEMAS } from './tracking-schemas.js';

export interface BrowserRoutesOptions {
  readonly directory: SourceDirectory;
  /** The configured public URL; undefined: each request's scheme and Host. */
  readonly publicUrl: string | undefined;
}

/**
 * How long browsers and proxies may keep the settings, the source config and
 * the loader script: what they hold changes only with the public URL or
 * when a source is deleted, and the ETag makes a re-check cheap.
 */
const SHORT_CACHE = 'public, max-age=300';
/** Lazy chunks have their content hash in their names: they never change. */
const IMMUTABLE_CACHE = 'public, max-age=31536000, immutable';
const JAVASCRIPT = 'application/javascript; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * What a website loads from Switchyard instead of Segment's or RudderStack's
 * servers: analytics.js's settings and the library itself (so Segment's
 * snippet works with only its host changed), and RudderStack's source config.
 * Encapsulated, with the Tracking API's CORS and error shape.
 */
export async function browserRoutes(app: FastifyInstance, options: BrowserRoutesOptions): Promise<void> {
  const { directory } = options;
  const bundles = new AnalyticsJsFiles(app.log);

  app.addHook('onRequest', allowAnyOrigin);
  // Answered on onRequest, before Fastify would read a body (a preflight has
  // none, and this route has no credential to check first).
  app.options(
    '/sourceConfig*',
    {
      onRequest: async (request, reply) => {
        answerPreflight(request, reply, 'GET, OPTIONS');
        return reply;
      },
    },
    async () => undefined,
  );

  const baseUrl = (request: FastifyRequest): string => {
    const base = publicBaseUrl(options.publicUrl, request.protocol, request.host);
    if (base === undefined) {
      throw new ApiError('invalid_host', 'the Host header is not a host name or address with an optional port; set the public URL (SWITCHYARD_PUBLIC_URL) when behind a proxy');
    }
    return base;
  };
  const sourceFor = (writeKey: string | undefined): SourceRecord => {
    const source = writeKey === undefined ? undefined : directory.byWriteKey(writeKey);
    if (source === undefined) throw new ApiError('unknown_write_key', writeKey === undefined ? 'no write key: send it in the path, the query or as Basic auth' : 'unknown write key');
    return source;
  };

  app.get<{ Params: { writeKey: string } }>('/v1/projects/:writeKey/settings', { schema: BROWSER_SCHEMAS.settings }, async (request, reply) => {
    const source = sourceFor(request.params.writeKey);
    return sendCacheable(request, reply, JSON_TYPE, SHORT_CACHE, Buffer.from(JSON.stringify(segmentSettings(source.writeKey, baseUrl(request)))));
  });

  app.get<{ Params: { writeKey: string } }>('/analytics.js/v1/:writeKey/analytics.min.js', { schema: BROWSER_SCHEMAS.loader }, async (request, reply) => {
    sourceFor(request.params.writeKey);
    return sendFile(request, reply, bundles.get('standalone.js'), SHORT_CACHE);
  });

  // analytics.js loads its lazy chunks from `<its CDN>/analytics-next/bundles/`,
  // the CDN being what precedes /analytics.js/v1/ in its own script's URL.
  app.get<{ Params: { file: string } }>('/analytics-next/bundles/:file', { schema: BROWSER_SCHEMAS.chunk }, async (request, reply) => {
    return sendFile(request, reply, bundles.chunk(request.params.file), IMMUTABLE_CACHE);
  });

  const sourceConfig = async (request: FastifyRequest<{ Querystring: { writeKey?: string } }>, reply: FastifyReply): Promise<void> => {
    const query = typeof request.query.writeKey === 'string' ? request.query.writeKey : undefined;
    const source = sourceFor(query ?? writeKeyFromAuthorization(request.headers.authorization));
    return sendCacheable(request, reply, JSON_TYPE, SHORT_CACHE, Buffer.from(JSON.stringify(rudderSourceConfig(source))));
  };
  app.get('/sourceConfig', { schema: BROWSER_SCHEMAS.sourceConfig }, sourceConfig);
  app.get('/sourceConfig/', { schema: BROWSER_SCHEMAS.sourceConfig }, sourceConfig);

  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    const api = error instanceof ApiError ? error : new ApiError('internal_error', 'internal error', { cause: error });
    if (api.statusCode >= 500) request.log.error({ err: error }, 'browser route error');
    void reply.header('cache-control', 'no-store').code(api.statusCode).send({ success: false, code: api.code, message: api.message });
  });
}

interface StaticFile {
  readonly body: Buffer;
  /** The same, gzip-compressed by the package. */
  readonly gzipped: Buffer | undefined;
  readonly etag: string;
}

/** The analytics.js files of the installed `@segment/analytics-next`, read on first use and kept. */
class AnalyticsJsFiles {
  private readonly folder: string | undefined;
  private readonly chunkNames: ReadonlySet<string>;
  private readonly cache = new Map<string, StaticFile>();

  constructor(log: FastifyInstance['log']) {
    let folder: string | undefined;
    try {
      const packageJson = createRequire(import.meta.url).resolve('@segment/analytics-next/package.json');
      folder = path.join(path.dirname(packageJson), 'dist', 'umd');
      if (!existsSync(path.join(folder, 'standalone.js'))) folder = undefined;
    } catch {
      folder = undefined;
    }
    if (folder === undefined) log.warn('@segment/analytics-next is not installed: /analytics.js/ answers 404');
    this.folder = folder;
    // Only the package's own chunk files are ever read: names come from its folder, not from requests.
    this.chunkNames = new Set(folder === undefined ? [] : readdirSync(folder).filter((name) => /^[\w-]+\.bundle\.[0-9a-f]+\.js$/.test(name)));
  }

  get(name: string): StaticFile {
    if (this.folder === undefined) throw new ApiError('file_not_found', 'analytics.js is not installed on this server');
    let file = this.cache.get(name);
    if (file === undefined) {
      const body = readFileSync(path.join(this.folder, name));
      const gzPath = path.join(this.folder, `${name}.gz`);
      file = { body, gzipped: existsSync(gzPath) ? readFileSync(gzPath) : undefined, etag: etagOf(body) };
      this.cache.set(name, file);
    }
    return file;
  }

  chunk(name: string): StaticFile {
    if (!this.chunkNames.has(name)) throw new ApiError('file_not_found', `no analytics.js chunk ${JSON.stringify(name.slice(0, 100))}`);
    return this.get(name);
  }
}

function etagOf(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}

/** Whether `If-None-Match` names `etag` (or is `*`). */
function notModified(request: FastifyRequest, etag: string): boolean {
  const header = request.headers['if-none-match'];
  if (typeof header !== 'string' || header.length > 4_096) return false;
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed === etag || trimmed === `W/${etag}`;
  });
}

function sendCacheable(request: FastifyRequest, reply: FastifyReply, type: string, cache: string, body: Buffer): FastifyReply {
  const etag = etagOf(body);
  reply.header('cache-control', cache).header('etag', etag);
  if (notModified(request, etag)) return reply.code(304).send();
  return reply.header('content-type', type).send(body);
}

function sendFile(request: FastifyRequest, reply: FastifyReply, file: StaticFile, cache: string): FastifyReply {
  reply.header('cache-control', cache).header('etag', file.etag).header('vary', 'Origin, Accept-Encoding');
  if (notModified(request, file.etag)) return reply.code(304).send();
  reply.header('content-type', JAVASCRIPT);
  if (file.gzipped !== undefined && acceptsGzip(request.headers['accept-encoding'])) {
    return reply.header('content-encoding', 'gzip').send(file.gzipped);
  }
  return reply.send(file.body);
}

/** Whether an `Accept-Encoding` header takes gzip (named with a q above 0). */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined || header.length > 1_024) return false;
  return header.split(',').some((entry) => {
    const [coding, ...params] = entry.split(';').map((part) => part.trim().toLowerCase());
    if (coding !== 'gzip' && coding !== 'x-gzip') return false;
    const q = params.find((param) => param.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}
