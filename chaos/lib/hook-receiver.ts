/**
 * A webhook receiver in the chaos runner's own process whose behaviour the
 * scenario changes while it runs: healthy (200 at once), down (port
 * closed: connection refused), slow (answers after a delay), or flapping
 * (200 and 503 in turn). It records every messageId it was sent and, for
 * bodies with `properties.sentAtMs`, the send-to-arrival latency.
 */
import http from 'node:http';
import type { Socket } from 'node:net';

export type ReceiverMode = { readonly kind: 'healthy' } | { readonly kind: 'down' } | { readonly kind: 'slow'; readonly delayMs: number } | { readonly kind: 'flapping' };

export interface Arrival {
  readonly sentAtMs: number;
  readonly arrivedAtMs: number;
}

export class HookReceiver {
  /** messageId → number of POSTs that carried it (answered or not). */
  readonly seen = new Map<string, number>();
  /** messageId → number of POSTs that carried it and were answered (or, when slow, are to be answered) 200. */
  readonly accepted = new Map<string, number>();
  /** One per POST carrying `properties.sentAtMs`, the first time its messageId arrived. */
  readonly arrivals: Arrival[] = [];
  posts = 0;
  answered: Record<string, number> = {};
  private mode: ReceiverMode = { kind: 'healthy' };
  private server: http.Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private flip = 0;

  private boundPort = 0;

  private constructor() {}

  /** Listens on a port chosen by the OS, kept across down/up. */
  static async start(): Promise<HookReceiver> {
    const receiver = new HookReceiver();
    receiver.boundPort = await receiver.listen(0);
    return receiver;
  }

  get port(): number {
    return this.boundPort;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  get currentMode(): ReceiverMode {
    return this.mode;
  }

  /** Every messageId in `ids` that has arrived at least once. */
  missing(ids: Iterable<string>): string[] {
    const out: string[] = [];
    for (const id of ids) if (!this.seen.has(id)) out.push(id);
    return out;
  }

  async setMode(mode: ReceiverMode): Promise<void> {
    if (mode.kind === 'down' && this.server !== undefined) {
      const server = this.server;
      this.server = undefined;
      for (const timer of this.timers) clearTimeout(timer);
      this.timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of this.sockets) socket.destroy();
      await closed;
    } else if (mode.kind !== 'down' && this.server === undefined) {
      await this.listen(this.port);
    }
    this.mode = mode;
  }

  async close(): Promise<void> {
    await this.setMode({ kind: 'down' });
  }

  private listen(port: number): Promise<number> {
    const server = http.createServer((request, response) => this.onRequest(request, response));
    server.keepAliveTimeout = 60_000;
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        const address = server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : 0);
      });
    });
  }

  private onRequest(request: http.IncomingMessage, response: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const arrivedAtMs = Date.now();
      this.posts += 1;
      const mode = this.mode;
      let status = 200;
      if (mode.kind === 'flapping') status = this.flip++ % 2 === 0 ? 503 : 200;
      this.record(Buffer.concat(chunks).toString('utf8'), arrivedAtMs, status);
      const reply = (): void => {
        this.answered[String(status)] = (this.answered[String(status)] ?? 0) + 1;
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end('{}');
      };
      if (mode.kind === 'slow') {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          if (!response.destroyed) reply();
        }, mode.delayMs);
        this.timers.add(timer);
      } else {
        reply();
      }
    });
  }

  /** Deliveries answered 200 beyond the first, over every messageId. */
  duplicates(): number {
    let extra = 0;
    for (const count of this.accepted.values()) extra += count - 1;
    return extra;
  }

  private record(body: string, arrivedAtMs: number, status: number): void {
    let parsed: { messageId?: unknown; properties?: { sentAtMs?: unknown } };
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      return;
    }
    if (typeof parsed.messageId !== 'string') return;
    const before = this.seen.get(parsed.messageId) ?? 0;
    this.seen.set(parsed.messageId, before + 1);
    if (status === 200) this.accepted.set(parsed.messageId, (this.accepted.get(parsed.messageId) ?? 0) + 1);
    const sentAtMs = parsed.properties?.sentAtMs;
    if (before === 0 && typeof sentAtMs === 'number') this.arrivals.push({ sentAtMs, arrivedAtMs });
  }
}
