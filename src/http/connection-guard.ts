import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export type CutReason = 'pipeline_too_deep' | 'stalled';

export interface ConnectionLimits {
  /** Requests of one connection being handled at once; the next ones wait, in order, and the connection is not read meanwhile. */
  readonly maxInFlight: number;
  /** Requests of one connection that may wait behind those; one more and the connection is cut. */
  readonly maxWaiting: number;
  /** A connection with answers waiting to be sent, of which the client took nothing for this long, is cut. */
  readonly stallMs: number;
  /** How often connections are looked at for stalls. */
  readonly checkEveryMs: number;
}

/**
 * Why: HTTP/1.1 lets a client pipeline requests without reading the answers.
 * Node parses every request of each chunk it reads (hundreds in 64 KB) and
 * hands them all to the application in one go, and it stops reading a
 * connection only once the answers fill the kernel's buffers, which on
 * Linux hold megabytes. Fifty such clients kept the event loop busy with
 * their requests for a minute: `/healthz` timed out and normal clients
 * waited seconds. Node cuts no connection whose last request is complete,
 * however long its answers sit unread.
 *
 * So each connection gets a share: at most `maxInFlight` of its requests are
 * handled at once, the following ones wait without being read further
 * (backpressure: a client that reads no answers soon has nothing more read
 * from it), a deeper pipeline than `maxWaiting` is cut, and so is a
 * connection whose answers the client has not taken for `stallMs`. A client
 * that sends a request after reading the previous answer, as every SDK and
 * browser does, never meets any of this.
 */
export class ConnectionGuard {
  private readonly connections = new Map<Socket, ConnectionState>();
  private readonly timer: NodeJS.Timeout;
  /** Connections cut, by reason. */
  readonly cuts: Record<CutReason, number> = { pipeline_too_deep: 0, stalled: 0 };

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly onCut: (reason: CutReason) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.timer = setInterval(() => this.cutStalled(), limits.checkEveryMs);
    this.timer.unref();
  }

  /** Follows the server's connections; stops looking at them once it closes. */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => {
      const state: ConnectionState = { inFlight: 0, waiting: [], paused: false, cut: false, taken: 0, takenAt: this.now() };
      this.connections.set(socket, state);
      // When a connection closes, Node fails each of its unanswered requests
      // with an Error whose stack it captures and reads: a cut pipeline has
      // hundreds, and their stacks were a fifth of the cost of a flood. They
      // say nothing (no code of ours is on them), so none are captured for a
      // connection this guard cut: the limit is lowered before Node's own
      // 'close' listener runs and restored right after it.
      let stackTraceLimit = Error.stackTraceLimit;
      socket.prependOnceListener('close', () => {
        stackTraceLimit = Error.stackTraceLimit;
        if (state.cut) Error.stackTraceLimit = 0;
      });
      socket.once('close', () => {
        Error.stackTraceLimit = stackTraceLimit;
        this.connections.delete(socket);
        state.waiting.length = 0;
      });
    });
    server.once('close', () => clearInterval(this.timer));
  }

  /** Wraps the application's request listener with the per-connection bounds. */
  wrap(handle: RequestListener): RequestListener {
    return (request, response) => {
      const socket = request.socket;
      const state = this.connections.get(socket);
      if (state === undefined) {
        handle(request, response); // not a connection of an attached server
        return;
      }
      // The rest of a chunk read before the connection was cut: Node parses it all the same.
      if (state.cut) return;
      if (state.inFlight < this.limits.maxInFlight) {
        this.dispatch(state, handle, request, response);
        return;
      }
      if (state.waiting.length >= this.limits.maxWaiting) {
        this.cut(socket, state, 'pipeline_too_deep');
        return;
      }
      state.waiting.push({ handle, request, response });
      if (!state.paused) {
        state.paused = true;
        socket.pause();
      }
    };
  }

  /** Stops the stall checks (also done when the attached server closes). */
  stop(): void {
    clearInterval(this.timer);
  }

  private cut(socket: Socket, state: ConnectionState, reason: CutReason): void {
    this.cuts[reason]++;
    this.onCut(reason);
    state.cut = true;
    state.waiting.length = 0;
    socket.destroy();
  }

  private dispatch(state: ConnectionState, handle: RequestListener, request: IncomingMessage, response: ServerResponse): void {
    state.inFlight++;
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      state.inFlight--;
      this.next(state, request.socket);
    };
    response.once('finish', end);
    response.once('close', end);
    handle(request, response);
  }

  private next(state: ConnectionState, socket: Socket): void {
    while (state.inFlight < this.limits.maxInFlight && state.waiting.length > 0 && !socket.destroyed) {
      const { handle, request, response } = state.waiting.shift()!;
      this.dispatch(state, handle, request, response);
    }
    if (state.paused && state.waiting.length === 0 && !socket.destroyed) {
      state.paused = false;
      socket.resume();
    }
  }

  /**
   * Cuts connections whose answers wait in Node's buffer (the kernel's is
   * full) while the client took no byte of them for `stallMs`. An idle
   * connection or a long answer that is still being written (the debugger's
   * stream) has nothing waiting, and is left alone.
   */
  private cutStalled(): void {
    const at = this.now();
    for (const [socket, state] of this.connections) {
      const taken = socket.bytesWritten - socket.writableLength;
      if (taken !== state.taken || socket.writableLength === 0) {
        state.taken = taken;
        state.takenAt = at;
      } else if (at - state.takenAt >= this.limits.stallMs) {
        this.cut(socket, state, 'stalled');
      }
    }
  }
}

interface Waiting {
  readonly handle: RequestListener;
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
}

interface ConnectionState {
  inFlight: number;
  readonly waiting: Waiting[];
  paused: boolean;
  /** Cut by this guard; what Node still parses of it is dropped. */
  cut: boolean;
  /** Bytes the client's connection took so far, and when that last changed. */
  taken: number;
  takenAt: number;
}
