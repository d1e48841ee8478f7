import type { IncomingMessage } from 'node:http';
import { type JsonObject, isJsonObject } from '../domain/message.js';
import { ApiError } from '../errors.js';
import type { BodyReservation } from './body-budget.js';
import { BodyBudgetExceeded, readBody } from './read-body.js';

/*
 * The Tracking API's body transport, apart from its routes: reading with
 * decompression and size limits (`read-body.ts`), parsing into a JSON
 * object, and lingering on a refused body so the client gets its answer.
 */

/** What a route says about its body (Fastify route config). */
export interface BodyConfig {
  readonly bodyLimit: number;
  /** Read (and bound) the body but do not parse it. */
  readonly ignoreBody?: boolean;
}

/** How long, and how much of, the unread rest of a refused body is read and dropped before the connection is cut. */
const LINGER_MS = 5_000;
const LINGER_BYTES = 1024 * 1024;

/**
 * After answering a refused body, reads and drops whatever the client still
 * sends, for a bounded time and size. Closing at once would make the kernel reset the
 * connection while request bytes are unread, and a reset can make the client
 * lose the answer it was sent (nginx calls this lingering close).
 */
export function discardRestOfBody(request: IncomingMessage): void {
  if (request.complete) return;
  const timer = setTimeout(() => request.socket.destroy(), LINGER_MS);
  timer.unref();
  let discarded = 0;
  // Bounded in bytes too: a client that keeps sending at full speed would
  // otherwise take the CPU from every other client for the whole linger.
  request.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) request.socket.destroy();
  });
  request.once('end', () => clearTimeout(timer));
  request.once('close', () => clearTimeout(timer));
  // Reading stopped with the request paused (see readBody): a listener alone does not start it again.
  request.resume();
}

/**
 * Reads and parses a body, reserving what it holds (see `readBody`); every
 * failure becomes an {@link ApiError}, but for {@link BodyBudgetExceeded}.
 */
export async function readParsedBody(raw: IncomingMessage, config: BodyConfig, reservation?: BodyReservation): Promise<ParsedBody | null> {
  let buffer: Buffer;
  try {
    buffer = await readBody(raw, config.bodyLimit, reservation);
  } catch (error) {
    if (error instanceof ApiError || error instanceof BodyBudgetExceeded) throw error;
    throw new ApiError('invalid_json', `the body could not be read: ${String(error)}`, { cause: error });
  }
  if (config.ignoreBody === true) return null;
  const { value, text } = parseJsonBody(buffer, raw.headers['content-type']);
  return { value, text, bytes: buffer.length };
}

export interface ParsedBody {
  readonly value: JsonObject;
  /** The JSON text as received (after decompression, without a byte order mark): what ingest stores. */
  readonly text: string;
  readonly bytes: number;
}

function parseJsonBody(buffer: Buffer, contentType: string | undefined): { value: JsonObject; text: string } {
  // gzip's magic bytes: compressed, but without a Content-Encoding saying so (or compressed twice). JSON.parse's message would quote the binary.
  if (buffer.length >= 2 && buffer[0] === 0x1f && buffer[1] === 0x8b) {
    throw new ApiError('invalid_json', 'the body is gzip-compressed data, not JSON: send it with the header Content-Encoding: gzip (and compress it once)');
  }
  let text = buffer.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') throw new ApiError('invalid_json', 'the body is empty; send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    // Form fields (curl -F) are not read as a message: say how to send JSON rather than where the parse stopped.
    const form = /^\s*multipart\/form-data\b/i.test(contentType ?? '');
    const hint = form ? ' (sent as multipart/form-data, as curl -F sends: the body must be one JSON object, e.g. curl -d \'{"userId":"u1","event":"…"}\')' : '';
    throw new ApiError('invalid_json', `the body is not valid JSON: ${(error as Error).message.slice(0, 200)}${hint}`);
  }
  if (!isJsonObject(value)) {
    throw new ApiError('body_not_object', `the body must be a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'null' : `a ${typeof value}`}`);
  }
  return { value, text };
}
