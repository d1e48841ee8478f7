import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { documented } from '../route-documentation.js';

/** Where `npm run build` puts the console: dist/console, beside dist/src. */
export const CONSOLE_DIR = path.resolve(import.meta.dirname, '..', '..', 'console');

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The console is one script and one stylesheet from this origin, and talks
 * only to this origin's admin API: nothing else may run, load or frame it.
 */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

interface Asset {
  readonly type: string;
  readonly raw: Buffer;
  readonly gzip: Buffer;
  readonly brotli: Buffer;
  readonly etag: string;
}

const CONSOLE_SCHEMAS = documented({
  page: { summary: 'The web console (HTML; sign in with the admin token)', tags: ['console'] },
  asset: {
    summary: "The web console's script, stylesheet and icon",
    tags: ['console'],
    params: { type: 'object', properties: { name: { type: 'string', maxLength: 64 } }, required: ['name'] },
  },
});

/**
 * Serves the built console at `/console` from memory: the few files are read
 * and compressed once, at start. When the console was not built (a bare
 * `tsc`), the page says how to build it rather than 404.
 */
export function consoleRoutes(app: FastifyInstance, directory: string = CONSOLE_DIR): void {
  const assets = loadAssets(directory);
  const index = assets.get('index.html');

  const page = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    if (index === undefined) {
      return reply
        .code(503)
        .headers(SECURITY_HEADERS)
        .type('text/plain; charset=utf-8')
        .send('The console was not built: run `npm run build` (it bundles console/ into dist/console).\n');
    }
    return sendAsset(request, reply, index);
  };
  app.get('/console', { schema: CONSOLE_SCHEMAS.page }, page);
  app.get('/console/', { schema: CONSOLE_SCHEMAS.page }, page);
  app.get<{ Params: { name: string } }>('/console/assets/:name', { schema: CONSOLE_SCHEMAS.asset }, async (request, reply) => {
    const asset = request.params.name === 'index.html' ? undefined : assets.get(request.params.name);
    if (asset === undefined) return reply.code(404).type('text/plain; charset=utf-8').send('not found\n');
    return sendAsset(request, reply, asset);
  });
}

function loadAssets(directory: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(directory)) return assets;
  for (const name of readdirSync(directory)) {
    const type = CONTENT_TYPES[path.extname(name)];
    if (type === undefined) continue;
    const raw = readFileSync(path.join(directory, name));
    assets.set(name, {
      type,
      raw,
      gzip: gzipSync(raw, { level: 9 }),
      brotli: brotliCompressSync(raw),
      etag: `"${createHash('sha256').update(raw).digest('base64url').slice(0, 22)}"`,
    });
  }
  return assets;
}

function sendAsset(request: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  // Revalidated on every load (names carry no hash), answered 304 when unchanged.
  void reply.headers(SECURITY_HEADERS).header('cache-control', 'no-cache').header('etag', asset.etag).header('vary', 'accept-encoding').type(asset.type);
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  const accepted = request.headers['accept-encoding'] ?? '';
  if (/\bbr\b/.test(accepted)) return reply.header('content-encoding', 'br').send(asset.brotli);
  if (/\bgzip\b/.test(accepted)) return reply.header('content-encoding', 'gzip').send(asset.gzip);
  return reply.send(asset.raw);
}
