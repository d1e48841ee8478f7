/**
 * A paced Tracking API client in the chaos runner's process: `ratePerSec`
 * single `/v1/track` calls on a fixed schedule, each with a new messageId
 * and its send time in `properties.sentAtMs`. It keeps every acknowledged
 * (200) messageId, the status codes and error codes of the rest, and the
 * response latencies. Never more than `maxInFlight` requests at once: when
 * the server is gone the schedule's slots are skipped, not queued.
 */
export interface SenderOptions {
  /** http://127.0.0.1:<port> */
  readonly baseUrl: string;
  readonly authorization: string;
  readonly ratePerSec: number;
  readonly idPrefix: string;
  readonly maxInFlight?: number;
  readonly timeoutMs?: number;
  /** Extra bytes of padding per message (a `properties.pad` string). */
  readonly padBytes?: number;
}

export interface ResponseLatency {
  readonly sentAtMs: number;
  readonly ms: number;
  readonly status: number;
}

export class PacedSender {
  readonly acknowledged = new Set<string>();
  /** HTTP status (or "error") → count. */
  readonly statuses: Record<string, number> = {};
  /** Error `code` of non-200 JSON answers → count. */
  readonly errorCodes: Record<string, number> = {};
  /** Non-200 answers that lacked a Retry-After header. */
  non200WithoutRetryAfter = 0;
  readonly latencies: ResponseLatency[] = [];
  sent = 0;
  skipped = 0;
  firstError: string | undefined;
  private inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private slots = 0;
  private readonly pad: string;

  constructor(private readonly options: SenderOptions) {
    this.pad = 'x'.repeat(options.padBytes ?? 0);
  }

  start(): void {
    this.startedAt = Date.now();
    this.timer = setInterval(() => this.tick(), 10);
  }

  /** Stops sending and waits for the requests in flight. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all([...this.inFlight]);
  }

  count(status: string): number {
    return this.statuses[status] ?? 0;
  }

  private tick(): void {
    const due = Math.floor(((Date.now() - this.startedAt) / 1000) * this.options.ratePerSec);
    const max = this.options.maxInFlight ?? 200;
    while (this.slots < due) {
      this.slots += 1;
      if (this.inFlight.size >= max) {
        this.skipped += 1;
        continue;
      }
      const promise = this.sendOne(`${this.options.idPrefix}-${this.sent++}`).finally(() => this.inFlight.delete(promise));
      this.inFlight.add(promise);
    }
  }

  private async sendOne(messageId: string): Promise<void> {
    const sentAtMs = Date.now();
    const started = performance.now();
    let status: string;
    try {
      const response = await fetch(`${this.options.baseUrl}/v1/track`, {
        method: 'POST',
        headers: { authorization: this.options.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'track', userId: 'chaos-user', event: 'Chaos', messageId, properties: { sentAtMs, pad: this.pad } }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      });
      const text = await response.text();
      status = String(response.status);
      this.latencies.push({ sentAtMs, ms: performance.now() - started, status: response.status });
      if (response.status === 200) {
        this.acknowledged.add(messageId);
      } else {
        if (response.headers.get('retry-after') === null) this.non200WithoutRetryAfter += 1;
        let code = 'unparsable';
        try {
          code = String((JSON.parse(text) as { code?: unknown }).code);
        } catch {
          // keep "unparsable"
        }
        this.errorCodes[code] = (this.errorCodes[code] ?? 0) + 1;
      }
    } catch (error) {
      status = 'error';
      this.firstError ??= error instanceof Error ? `${error.message}${error.cause instanceof Error ? `: ${error.cause.message}` : ''}` : String(error);
    }
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
  }
}
