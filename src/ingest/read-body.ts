import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import { ApiError } from '../errors.js';
import type { BodyReservation } from './body-budget.js';

/** Slack allowed on compressed input over the decompressed limit (gzip headers, incompressible data). */
const COMPRESSED_SLACK_BYTES = 64 * 1024;
/** What a decompressing body is counted as holding before its first byte: zlib's window and buffers. */
const DECODER_BYTES = 64 * 1024;

/** A body the {@link BodyBudget} had no room for: nothing more of it is read. */
export class BodyBudgetExceeded extends Error {
  constructor(readonly bound: 'client' | 'total') {
    super(`no room to read the body (${bound})`);
  }
}

/**
 * Reads a request body of at most `limit` bytes after decompression, counting
 * while streaming so that a huge, endless or zip-bomb body is never held whole:
 * reading stops at the first byte over the limit. Throws {@link ApiError}.
 *
 * With a reservation, what the body may hold is reserved before it is held:
 * its declared length before any byte is read, or, chunked or compressed,
 * each chunk as it comes. Throws {@link BodyBudgetExceeded} when the budget
 * has no room.
 */
export async function readBody(request: IncomingMessage, limit: number, reservation?: BodyReservation): Promise<Buffer> {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const declared = Number(request.headers['content-length']);
  let decoder: Transform | undefined;
  switch (encoding) {
    case 'identity':
    case '':
      if (declared > limit) throw tooLarge(limit);
      break;
    case 'gzip':
    case 'x-gzip':
      decoder = createGunzip();
      break;
    case 'deflate':
      decoder = createInflate();
      break;
    default:
      throw new ApiError('unsupported_encoding', `Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} is not supported; use gzip or none`);
  }
  if (decoder !== undefined && declared > limit + COMPRESSED_SLACK_BYTES) throw tooLarge(limit);
  // Before the first byte: a declared length is what the body will hold.
  const base = decoder === undefined ? 0 : DECODER_BYTES;
  if (reservation !== undefined && !reservation.growTo(base + (decoder === undefined && declared > 0 ? declared : 0))) throw exceeded(reservation);
  const reserve = reservation === undefined ? undefined : (size: number): BodyBudgetExceeded | undefined => (reservation.growTo(base + size) ? undefined : exceeded(reservation));
  return decoder === undefined ? collect(request, request, limit, reserve) : collectDecoded(request, decoder, limit, reserve);
}

/** Reserves room for a body of `size` bytes read so far; the refusal when there is none. */
type Reserve = (size: number) => BodyBudgetExceeded | undefined;

function exceeded(reservation: BodyReservation): BodyBudgetExceeded {
  return new BodyBudgetExceeded(reservation.refusedBy ?? 'total');
}

async function collectDecoded(
  request: IncomingMessage,
  decoder: Transform,
  limit: number,
  reserve: Reserve | undefined,
): Promise<Buffer> {
  let compressed = 0;
  const onData = (chunk: Buffer): void => {
    compressed += chunk.length;
    if (compressed > limit + COMPRESSED_SLACK_BYTES) decoder.destroy(tooLarge(limit));
  };
  const onError = (error: Error): void => {
    decoder.destroy(error);
  };
  request.on('data', onData);
  request.on('error', onError);
  request.pipe(decoder);
  try {
    return await collect(decoder, request, limit, reserve);
  } catch (error) {
    if (error instanceof ApiError || error instanceof BodyBudgetExceeded) throw error;
    throw new ApiError('invalid_encoding', 'the body is not valid gzip or deflate data', { cause: error });
  } finally {
    request.off('data', onData);
    request.off('error', onError);
    request.unpipe(decoder);
    decoder.destroy(); // frees zlib's memory at once, whatever happened
  }
}

/**
 * Collects a stream's chunks up to `limit` bytes, each reserved first
 * (`reserve(size so far)`). Over the limit, or without room, it stops
 * listening and pauses the request rather than destroying it, so that the
 * caller can still answer (and close the connection).
 */
function collect(
  stream: NodeJS.ReadableStream,
  request: IncomingMessage,
  limit: number,
  reserve: Reserve | undefined,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      request.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        request.pause();
        reject(tooLarge(limit));
        return;
      }
      const refused = reserve?.(size);
      if (refused !== undefined) {
        cleanup();
        request.pause();
        reject(refused);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onAborted = (): void => onError(new Error('the client aborted the request'));
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    request.on('aborted', onAborted);
  });
}

function tooLarge(limit: number): ApiError {
  return new ApiError('body_too_large', `the body is over ${Math.round(limit / 1024)} KB (measured after decompression)`);
}
