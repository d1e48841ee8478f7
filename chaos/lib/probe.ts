import { summarize, type Latencies } from './harness.js';

/**
 * Asks one URL every `everyMs`, each request bounded by `timeoutMs`, and
 * counts the answers that were not 200 (a timeout or an error counts too).
 */
export class Probe {
  readonly latencies: number[] = [];
  failures = 0;
  firstFailure: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly url: string,
    private readonly options: { everyMs: number; timeoutMs: number; headers?: Record<string, string> },
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      const asking = this.askOnce().finally(() => this.inFlight.delete(asking));
      this.inFlight.add(asking);
    }, this.options.everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight]);
  }

  get asked(): number {
    return this.latencies.length + this.failures;
  }

  summary(): Latencies {
    return summarize(this.latencies);
  }

  private async askOnce(): Promise<void> {
    const started = performance.now();
    try {
      const response = await fetch(this.url, { headers: this.options.headers, signal: AbortSignal.timeout(this.options.timeoutMs) });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
      this.latencies.push(performance.now() - started);
    } catch (error) {
      this.failures++;
      this.firstFailure ??= error instanceof Error ? error.message : String(error);
    }
  }
}
