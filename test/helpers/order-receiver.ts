import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the receiver answers one request. */
export interface OrderReply {
  readonly status: number;
  readonly delayMs: number;
}

export interface Arrival {
  readonly key: string;
  /** `properties.i` of the message: its place in the order the test sent them. */
  readonly index: number;
  readonly replay: string | undefined;
}

/**
 * A receiver that watches what ordered delivery promises: per key (userId,
 * else anonymousId), how many requests are open at once (a request counts
 * from its arrival until its answer is sent or its connection closes, e.g.
 * when the sender timed out), and the order in which the messages arrive.
 */
export class OrderReceiver {
  readonly arrivals: Arrival[] = [];
  /** Message indexes answered with a 2xx. */
  readonly answered = new Set<number>();
  /** The same, apart per replay id ('live' for the live copies). */
  readonly answeredBy = new Map<string, Set<number>>();
  /** Arrivals that found another message of their key (and replay, or live) still open. */
  readonly overlaps: Arrival[] = [];
  url = '';
  /** The message indexes of the requests open per key, one entry per request. */
  private readonly open = new Map<string, number[]>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly server = createServer((request, response) => this.handle(request, response));

  /** `decide(arrivalNumber)`: the answer; a delay past the sender's timeout makes it time out. */
  constructor(private readonly decide: (arrival: number, message: Arrival) => OrderReply) {}

  async listen(): Promise<this> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  /** Keys whose messages arrived out of order (a later index before an earlier one), for the given arrivals. */
  inversions(filter: (arrival: Arrival) => boolean = () => true): string[] {
    const last = new Map<string, number>();
    const found: string[] = [];
    for (const arrival of this.arrivals.filter(filter)) {
      const before = last.get(arrival.key);
      if (before !== undefined && arrival.index < before) found.push(`${arrival.key}: ${arrival.index} after ${before}`);
      last.set(arrival.key, Math.max(before ?? -1, arrival.index));
    }
    return found;
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { userId?: string; anonymousId?: string; properties?: { i?: number } };
      const replay = request.headers['x-switchyard-replay'];
      const arrival: Arrival = {
        key: body.userId ?? body.anonymousId ?? '',
        index: body.properties?.i ?? -1,
        replay: typeof replay === 'string' ? replay : undefined,
      };
      // Live and replayed copies are ordered apart: count them apart.
      const openKey = `${arrival.replay ?? 'live'}\u0000${arrival.key}`;
      const open = this.open.get(openKey) ?? [];
      // The same message again while its first request is still open here is
      // the sender's retry after it gave up on that request (a timeout): the
      // closed connection reaches this side a little later. That is the
      // at-least-once re-send, not a second message in flight.
      if (open.some((index) => index !== arrival.index)) this.overlaps.push(arrival);
      open.push(arrival.index);
      this.open.set(openKey, open);
      this.arrivals.push(arrival);
      const reply = this.decide(this.arrivals.length - 1, arrival);
      let closed = false;
      const close = (): void => {
        if (closed) return;
        closed = true;
        const still = this.open.get(openKey) ?? [];
        still.splice(still.indexOf(arrival.index), 1);
      };
      response.on('close', close);
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        if (response.destroyed) return;
        close();
        if (reply.status < 300) {
          this.answered.add(arrival.index);
          const by = arrival.replay ?? 'live';
          if (!this.answeredBy.has(by)) this.answeredBy.set(by, new Set());
          this.answeredBy.get(by)!.add(arrival.index);
        }
        response.writeHead(reply.status).end();
      }, reply.delayMs);
      this.timers.add(timer);
    });
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }
}
