import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { shareKey } from '../domain/client-address.js';
import { type ConnectionCaps, type ConnectionRefusal, refuseConnection } from '../domain/connection-caps.js';

export interface AdmissionLimits {
  readonly caps: ConnectionCaps;
  /**
   * Refused connections being answered at once. Past it, one more refused
   * connection is closed without an answer, and past `caps.total` plus this
   * Node closes new connections as it accepts them: a flood of connections
   * costs no more than this many answers in the making.
   */
  readonly maxAnswering: number;
  /**
   * How long a refused connection is kept after its answer was handed to
   * the kernel, so that the client reads it, before it is closed whatever
   * the client does.
   */
  readonly lingerMs: number;
  /** `Retry-After` of the answer, in seconds. */
  readonly retryAfterS: number;
}

/**
 * Caps how many connections the server holds (see {@link ConnectionCaps}),
 * in all and per address. A connection past a cap is answered `503
 * overloaded` and closed without anything being read from it: a refusal
 * must cost less than what it refuses, so no parser is given to it, its
 * bytes stay in the kernel, and the answer is written from bytes made once.
 */
export class ConnectionAdmission {
  private held = 0;
  private readonly perAddress = new Map<string, number>();
  private readonly answering = new Set<Socket>();
  private readonly answers: Record<ConnectionRefusal, Buffer>;
  private stopped = false;
  /** Connections refused, by reason (those closed unanswered included). */
  readonly refusals: Record<ConnectionRefusal, number> = { total: 0, per_address: 0 };

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly onRefuse: (reason: ConnectionRefusal) => void = () => undefined,
  ) {
    this.answers = { total: refusal('total', limits.retryAfterS), per_address: refusal('per_address', limits.retryAfterS) };
  }

  /** Connections held now (admitted and not yet closed). */
  get open(): number {
    return this.held;
  }

  /** Refused connections whose answer is being sent or read now. */
  get refusing(): number {
    return this.answering.size;
  }

  /**
   * Admits the server's connections. Attach it after every other
   * `connection` listener of the server (Node's HTTP parser, registered by
   * `createServer`, and ConnectionGuard's): it takes them and calls them
   * for admitted connections only. A listener added later sees refused
   * connections too.
   */
  attach(server: Server): void {
    const listeners = server.listeners('connection') as Array<(socket: Socket) => void>;
    server.removeAllListeners('connection');
    // A new socket starts reading as it is made, before any listener runs;
    // paused, nothing of it is read until it is admitted (Node's HTTP
    // server reads it once resumed, as after its own pauses).
    (server as Server & { pauseOnConnect: boolean }).pauseOnConnect = true;
    // The cheapest refusal, Node's own: the connection is closed as it is
    // accepted, with no socket object made. Reached only when both the cap
    // and the answers in the making are full.
    server.maxConnections = this.limits.caps.total + this.limits.maxAnswering;
    server.on('drop', () => this.count('total'));
    server.on('connection', (socket: Socket) => {
      const key = this.limits.caps.perAddress > 0 ? shareKey(socket.remoteAddress) : undefined;
      const refused = refuseConnection(this.limits.caps, this.held, key === undefined ? 0 : (this.perAddress.get(key) ?? 0));
      if (refused !== undefined) {
        this.refuse(socket, refused);
        return;
      }
      this.admit(socket, key);
      for (const listener of listeners) listener.call(server, socket);
      socket.resume();
    });
  }

  /** Closes the refused connections still being answered, and from now on closes refused ones unanswered (the server is closing). */
  stop(): void {
    this.stopped = true;
    for (const socket of this.answering) socket.destroy();
  }

  private admit(socket: Socket, key: string | undefined): void {
    this.held++;
    if (key !== undefined) this.perAddress.set(key, (this.perAddress.get(key) ?? 0) + 1);
    socket.once('close', () => {
      this.held--;
      if (key === undefined) return;
      const left = this.perAddress.get(key)! - 1;
      // Deleted at zero: the map holds only the addresses holding connections now.
      if (left === 0) this.perAddress.delete(key);
      else this.perAddress.set(key, left);
    });
  }

  private refuse(socket: Socket, reason: ConnectionRefusal): void {
    this.count(reason);
    if (this.stopped || this.answering.size >= this.limits.maxAnswering) {
      socket.destroy();
      return;
    }
    this.answering.add(socket);
    // A client that resets the connection before taking the answer: nothing to report.
    socket.on('error', () => undefined);
    socket.once('close', () => this.answering.delete(socket));
    // Nothing is read from it, so its end cannot be seen: it is closed after
    // lingerMs, time for the client to read the answer (closing a socket
    // with unread bytes resets it, which may lose an answer not yet read).
    socket.setTimeout(this.limits.lingerMs, () => socket.destroy());
    socket.end(this.answers[reason]);
  }

  private count(reason: ConnectionRefusal): void {
    this.refusals[reason]++;
    this.onRefuse(reason);
  }
}

/**
 * The whole answer to a refused connection, made once. The request is not
 * read, so which API it was for is unknown: the body is in both of their
 * error shapes at once, the Tracking API's `success`, `code` and `message`
 * and the admin API's `error` (docs/errors.md).
 */
function refusal(reason: ConnectionRefusal, retryAfterS: number): Buffer {
  const message =
    reason === 'total'
      ? 'the server holds as many connections as it may; nothing was read, retry later'
      : 'this address holds as many connections as it may; close one, or retry later; nothing was read';
  const body = JSON.stringify({ success: false, code: 'overloaded', message, error: { code: 'overloaded', message } });
  return Buffer.from(
    'HTTP/1.1 503 Service Unavailable\r\n' +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `Retry-After: ${retryAfterS}\r\n` +
      'Connection: close\r\n' +
      '\r\n' +
      body,
  );
}
