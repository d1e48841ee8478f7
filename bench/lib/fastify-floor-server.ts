/**
 * The framework floor of the ingest benches, run as its own process: what
 * the bare baseline (baseline-server.ts) does, but on Fastify 5 with its
 * default JSON body parser. Switchyard is built on Fastify, so this server's
 * ratio to the bare baseline is the best any Fastify-based collector can
 * reach on the machine before storing anything; Switchyard's ratios are read
 * against it. Nothing is stored or validated, on purpose.
 *
 * Usage: PORT=<port> HOST=127.0.0.1 node dist/bench/lib/fastify-floor-server.js
 */
import Fastify, { type FastifyError } from 'fastify';

const SUCCESS = '{"success":true}';
const INVALID = '{"success":false,"code":"invalid_json"}';
const CONTENT_TYPE = 'application/json; charset=utf-8';

const app = Fastify({
  logger: false,
  // Switchyard's batch limit: 100-message batches (~60 KB) must never be refused for size.
  bodyLimit: 500 * 1024,
  // The baseline's window too (it copies Fastify's default), stated so that a change of default cannot split them.
  keepAliveTimeout: 72_000,
  // Like the baseline's closeAllConnections(): SIGTERM must not wait for the load generator's keep-alive sockets.
  forceCloseConnections: true,
});

// The baseline parses every body as JSON whatever its Content-Type; the load
// client sends application/json, which Fastify's own parser takes, and this
// catch-all hands any other type to that same parser instead of a 415.
app.addContentTypeParser('*', { parseAs: 'string' }, app.getDefaultJsonParser('error', 'error'));

app.get('/healthz', (_request, reply) => {
  void reply.header('content-type', CONTENT_TYPE).send('{"status":"ok"}');
});

app.setErrorHandler((error: FastifyError, _request, reply) => {
  const status = error.statusCode ?? 500;
  void reply
    .code(status)
    .header('content-type', CONTENT_TYPE)
    .send(status === 400 ? INVALID : JSON.stringify({ success: false, code: error.code }));
});

for (const path of ['/v1/track', '/v1/batch']) {
  app.post(path, (request, reply) => {
    // Fastify skips parsing a request without a body; the baseline's JSON.parse('') answers 400, so must this.
    if (request.body === undefined) {
      void reply.code(400).header('content-type', CONTENT_TYPE).send(INVALID);
      return;
    }
    void reply.header('content-type', CONTENT_TYPE).send(SUCCESS);
  });
}

app.listen({ port: Number(process.env['PORT'] ?? 0), host: process.env['HOST'] ?? '127.0.0.1' }).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

const shutdown = (): void => {
  void app.close().then(() => process.exit(0));
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
