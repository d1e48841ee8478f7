/**
 * Runs a background stage's `pass` on demand, one at a time: a wake while a
 * pass runs makes one more pass after it (so no wake is lost and no two
 * passes overlap), and a poll wakes it too (work another node or thread
 * added, a notification missed). An error ends the pass and goes to
 * `onError`; the next wake or poll tries again.
 */
export class PassLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly pass: () => Promise<void>,
    private readonly pollMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Starts polling and makes a first pass. */
  start(): void {
    this.timer = setInterval(() => this.wake(), this.pollMs);
    this.timer.unref();
    this.wake();
  }

  /** Passes now, or once more after the pass under way. */
  wake(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.pass();
        } while (this.again && !this.stopped);
      } catch (error) {
        this.onError(error);
      } finally {
        this.running = undefined;
      }
    })();
  }

  /** Whether a pass is under way (or about to make one more). */
  get isRunning(): boolean {
    return this.running !== undefined;
  }

  /** Whether `stop` was called: a long pass checks it between its steps. */
  get isStopped(): boolean {
    return this.stopped;
  }

  /** Stops polling and waits for the pass under way, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }
}
