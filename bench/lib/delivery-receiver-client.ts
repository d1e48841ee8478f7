import { fileURLToPath } from 'node:url';
import { type ManagedChild, spawnManaged } from './children.js';
import type { ReceiverLine, ReceiverReset, ReceiverStats } from './delivery-protocol.js';
import { HOOK_PATH } from './delivery-protocol.js';
import { cpuSeconds } from './proc-stats.js';
import { lastLines } from './target.js';

const RECEIVER_SCRIPT = fileURLToPath(new URL('./delivery-receiver.js', import.meta.url));
const START_TIMEOUT_MS = 15_000;

/** Where the receiver stands: the newest progress line or mark of the current phase. */
export interface ReceiverPoint {
  readonly count: number;
  readonly at: number;
  /** True for a `mark` line (the exact arrival time of that count). */
  readonly mark: boolean;
}

/** The bench's handle on lib/delivery-receiver.ts, running as a child process. */
export class Receiver {
  private phase = 'idle';
  private latest: ReceiverPoint = { count: 0, at: 0, mark: false };
  private readonly listeners = new Set<(point: ReceiverPoint) => void>();

  private constructor(
    private readonly child: ManagedChild,
    readonly port: number,
  ) {}

  /** Starts the receiver (pinned to `cpus`) and waits until it listens. */
  static async start(cpus: string | undefined): Promise<Receiver> {
    // Lines are passed on once the handle exists; before that only `listening` matters.
    const sink: { receiver?: Receiver } = {};
    let onListening: ((port: number) => void) | undefined;
    const listening = new Promise<number>((resolve) => (onListening = resolve));
    const child = spawnManaged('webhook receiver', process.execPath, [RECEIVER_SCRIPT], {
      cpus,
      onStdoutLine: (line) => {
        let message: ReceiverLine;
        try {
          message = JSON.parse(line) as ReceiverLine;
        } catch {
          return;
        }
        if (message.event === 'listening') onListening?.(message.port);
        else sink.receiver?.onLine(message);
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const port = await Promise.race([
      listening,
      child.exited.then(() => 0),
      new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), START_TIMEOUT_MS))),
    ]).finally(() => clearTimeout(timer));
    if (port === 0) {
      await child.stop(1000);
      throw new Error(`the webhook receiver did not start: ${lastLines(child.outputTail())}`);
    }
    sink.receiver = new Receiver(child, port);
    return sink.receiver;
  }

  get pid(): number {
    return this.child.pid;
  }

  /** The URL Switchyard delivers to. */
  get hookUrl(): string {
    return `http://127.0.0.1:${this.port}${HOOK_PATH}`;
  }

  cpuSeconds(): number | undefined {
    return cpuSeconds(this.child.pid);
  }

  failure(): string | undefined {
    const status = this.child.exitStatus();
    return status === undefined ? undefined : `the webhook receiver exited (code ${status.code ?? status.signal}): ${lastLines(this.child.outputTail())}`;
  }

  /** Starts counting a new phase from zero. */
  async reset(request: ReceiverReset): Promise<void> {
    await this.control('POST', '/_bench/reset', request);
    this.phase = request.phase;
    this.latest = { count: 0, at: 0, mark: false };
  }

  async stats(): Promise<ReceiverStats> {
    return (await this.control('GET', '/_bench/stats')) as ReceiverStats;
  }

  get current(): ReceiverPoint {
    return this.latest;
  }

  /** Calls `listener` with every progress line and mark of the current phase; returns the unsubscribe. */
  watch(listener: (point: ReceiverPoint) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves true once `check` holds for a point, false after `timeoutMs`; rejects when `failure` reports one. */
  waitFor(check: (point: ReceiverPoint) => boolean, timeoutMs: number, failure: () => string | undefined = () => undefined): Promise<boolean> {
    if (check(this.latest)) return Promise.resolve(true);
    return new Promise((resolve, reject) => {
      const finish = (result: boolean | Error): void => {
        unwatch();
        clearTimeout(timer);
        clearInterval(poll);
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      const unwatch = this.watch((point) => {
        if (check(point)) finish(true);
      });
      const timer = setTimeout(() => finish(false), timeoutMs);
      const poll = setInterval(() => {
        const problem = failure() ?? this.failure();
        if (problem !== undefined) finish(new Error(problem));
      }, 200);
    });
  }

  async stop(): Promise<void> {
    await this.child.stop(2000);
  }

  private onLine(line: Exclude<ReceiverLine, { event: 'listening' }>): void {
    if (line.phase !== this.phase) return;
    // A mark may arrive after a later progress line was written; never go back.
    if (line.count < this.latest.count) return;
    this.latest = { count: line.count, at: line.at, mark: line.event === 'mark' };
    for (const listener of this.listeners) listener(this.latest);
  }

  private async control(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    const response = await fetch(`http://127.0.0.1:${this.port}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`receiver ${method} ${path} answered ${response.status}: ${text}`);
    return JSON.parse(text) as unknown;
  }
}
