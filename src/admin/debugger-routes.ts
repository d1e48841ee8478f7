import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import type { DebuggerAdmin } from './debugger-admin.js';
import { DebuggerStream, MAX_DEBUGGER_STREAMS, type StreamStore } from './debugger-stream.js';
import { DEBUGGER_SCHEMAS } from './route-schemas.js';

export interface DebuggerRoutesOptions {
  readonly admin: DebuggerAdmin;
  /** The store the live stream reads. */
  readonly streamStore: StreamStore;
  readonly onError: (error: unknown) => void;
}

/**
 * A source's debugger, as an `extensions` entry of adminRoutes (same auth and
 * error shape): the recent messages, and the same live as Server-Sent Events.
 */
export function debuggerRoutes(options: DebuggerRoutesOptions): (app: FastifyInstance) => void {
  const { admin, streamStore, onError } = options;
  return (app) => {
    app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>('/sources/:id/debugger', { schema: DEBUGGER_SCHEMAS.list }, async (request) =>
      admin.list(request.params.id, request.query),
    );
    app.get<{ Params: { id: string; seq: string } }>('/sources/:id/debugger/messages/:seq', { schema: DEBUGGER_SCHEMAS.get }, async (request) =>
      admin.get(request.params.id, request.params.seq),
    );

    const open = new Set<DebuggerStream>();
    // Streams never end by themselves, and the server's close waits for every
    // connection: end them before it does.
    app.addHook('preClose', async () => {
      for (const stream of open) stream.close();
    });
    app.get<{ Params: { id: string } }>('/sources/:id/debugger/stream', { schema: DEBUGGER_SCHEMAS.stream }, async (request, reply) => {
      // Everything that can fail with an error answer happens before the hijack.
      const afterSeq = await admin.streamCursor(request.params.id, request.headers['last-event-id']);
      if (open.size >= MAX_DEBUGGER_STREAMS) {
        void reply.header('retry-after', '5');
        throw new ApiError('overloaded', `${MAX_DEBUGGER_STREAMS} live debugger streams are open on this node, the most it serves at once; close one, or retry later`);
      }
      reply.hijack();
      const stream = new DebuggerStream(reply.raw, { store: streamStore, sourceId: request.params.id, afterSeq, onError });
      open.add(stream);
      stream.onClose(() => open.delete(stream));
      stream.start();
    });
  };
}
