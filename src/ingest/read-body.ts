import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import { ApiError } from '../errors.js';

/** Slack allowed on compressed input over the decompressed limit (gzip headers, incompressible data). */
const COMPRESSED_SLACK_BYTES = 64 * 1024;

/**
 * Reads a request body of at most `limit` bytes after decompression, counting
 * while streaming so that a huge, endless or zip-bomb body is never held whole:
 * reading stops at the first byte over the limit. Throws {@link ApiError}.
 */
export async function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
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
  return decoder === undefined ? collect(request, request, limit) : collectDecoded(request, decoder, limit);
}

async function collectDecoded(request: IncomingMessage, decoder: Transform, limit: number): Promise<Buffer> {
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
    return await collect(decoder, request, limit);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw new ApiError('invalid_encoding', 'the body is not valid gzip or deflate data', { cause: error });
  } finally {
    request.off('data', onData);
    request.off('error', onError);
    request.unpipe(decoder);
    decoder.destroy(); // frees zlib's memory at once, whatever happened
  }
}

/**
 * Collects a stream's chunks up to `limit` bytes. Over the limit it stops
 * listening and pauses the request rather than destroying it, so that the
 * caller can still answer 400 (and close the connection).
 */
function collect(stream: NodeJS.ReadableStream, request: IncomingMessage, limit: number): Promise<Buffer> {
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
