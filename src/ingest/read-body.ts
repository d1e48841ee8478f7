import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import { ApiError } from '../errors.js';
import type { BodyReservation } from './body-budget.js';

/** Slack allowed on compressed input over the decompressed limit (gzip headers, incompressible data). */
const COMPRESSED_SLACK_BYTES = 64 * 1024;
/** What a decompressing body is counted as holding at most for its decoder (zlib's window and buffers), as compressed bytes arrive. */
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
 * The bytes are kept in one buffer that grows with them (see
 * {@link BodyBuffer}), so what a body holds is what it sent, never more than
 * twice that, whatever its chunks. With a reservation, each growth is
 * reserved before it is made (a compressed body also counts its decoder,
 * as compressed bytes arrive); without room it throws
 * {@link BodyBudgetExceeded}.
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
  // A declared length caps the buffer: it never grows past what the body will hold.
  const body = new BodyBuffer(decoder === undefined && declared > 0 ? declared : limit);
  if (decoder === undefined) {
    const reserve = reservation === undefined ? undefined : (bytes: number) => (reservation.growTo(bytes) ? undefined : refusal(reservation));
    return collect(request, request, limit, body, reserve);
  }
  // A decoder's own memory is counted as what was sent grows, up to
  // DECODER_BYTES: counted whole from the first byte, a head alone would
  // take 64 KB of the budget (1,024 of them, all of it).
  let decoderShare = 0;
  const reserve = reservation === undefined ? undefined : (bytes: number) => (reservation.growTo(decoderShare + bytes) ? undefined : refusal(reservation));
  const onCompressed =
    reserve === undefined
      ? undefined
      : (compressed: number): BodyBudgetExceeded | undefined => {
          decoderShare = Math.min(DECODER_BYTES, 2 * compressed);
          return reserve(body.holding);
        };
  return collectDecoded(request, decoder, limit, body, reserve, onCompressed);
}

function refusal(reservation: BodyReservation): BodyBudgetExceeded {
  return new BodyBudgetExceeded(reservation.refusedBy ?? 'total');
}

/** Reserves room for `bytes` held in all by the body; the refusal when there is none. */
type Reserve = (bytes: number) => BodyBudgetExceeded | undefined;

/**
 * A body's bytes. The first chunk is kept as it came (most bodies arrive in
 * one); from the second on they are copied into one buffer, which doubles as
 * needed up to `cap`, so it holds less than twice what arrived. Keeping the
 * chunks themselves would cost an object per chunk: a chunked body of
 * 490,000 one-byte chunks held 215 MB.
 */
class BodyBuffer {
  private first: Buffer | undefined;
  private buffer: Buffer | undefined;
  size = 0;

  constructor(private readonly cap: number) {}

  /** Bytes held now. */
  get holding(): number {
    return this.buffer?.length ?? this.size;
  }

  /** Bytes held once `chunk` is added. */
  holdingWith(chunk: Buffer): number {
    const needed = this.size + chunk.length;
    const held = this.holding;
    if (this.size === 0) return needed;
    if (this.buffer !== undefined && needed <= held) return held;
    // Doubling what is held (never more than twice what arrived), bounded by the cap unless more is needed.
    return Math.max(needed, Math.min(this.cap, 2 * held));
  }

  add(chunk: Buffer): void {
    if (this.size === 0) {
      this.first = chunk;
      this.size = chunk.length;
      return;
    }
    const holding = this.holdingWith(chunk);
    if (this.buffer === undefined || holding > this.buffer.length) {
      const grown = Buffer.allocUnsafe(holding);
      if (this.buffer !== undefined) this.buffer.copy(grown, 0, 0, this.size);
      else this.first!.copy(grown, 0);
      this.buffer = grown;
      this.first = undefined;
    }
    chunk.copy(this.buffer, this.size);
    this.size += chunk.length;
  }

  /** The body's bytes. */
  bytes(): Buffer {
    if (this.buffer !== undefined) return this.buffer.subarray(0, this.size);
    return this.first ?? Buffer.alloc(0);
  }
}

async function collectDecoded(
  request: IncomingMessage,
  decoder: Transform,
  limit: number,
  body: BodyBuffer,
  reserve: Reserve | undefined,
  onCompressed: ((compressed: number) => BodyBudgetExceeded | undefined) | undefined,
): Promise<Buffer> {
  let compressed = 0;
  const onData = (chunk: Buffer): void => {
    compressed += chunk.length;
    if (compressed > limit + COMPRESSED_SLACK_BYTES) decoder.destroy(tooLarge(limit));
    const refused = onCompressed?.(compressed);
    if (refused !== undefined) decoder.destroy(refused);
  };
  const onError = (error: Error): void => {
    decoder.destroy(error);
  };
  // For the decoder's whole life: an error after collect stopped listening
  // (a client gone mid-body: the request's 'aborted' comes first, its
  // 'error' next) would otherwise be unhandled, and end the process.
  decoder.on('error', ignore);
  request.on('data', onData);
  request.on('error', onError);
  request.pipe(decoder);
  try {
    return await collect(decoder, request, limit, body, reserve);
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

function ignore(): void {}

/**
 * Collects a stream's chunks into `body`, up to `limit` bytes, reserving
 * each growth first. Over the limit, or without room, it stops listening
 * and pauses the request rather than destroying it, so that the caller can
 * still answer (and close the connection).
 */
function collect(stream: NodeJS.ReadableStream, request: IncomingMessage, limit: number, body: BodyBuffer, reserve: Reserve | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const cleanup = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      request.off('aborted', onAborted);
    };
    const stop = (error: Error): void => {
      cleanup();
      request.pause();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      if (body.size + chunk.length > limit) return stop(tooLarge(limit));
      const refused = reserve?.(body.holdingWith(chunk));
      if (refused !== undefined) return stop(refused);
      body.add(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(body.bytes());
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
