import type { ChangeFeed, ConfigStore } from './store.js';

/** What a snapshot reads: the config version, and `config` notifications. */
export type ConfigSource = ConfigStore & ChangeFeed;

/**
 * A value built from the store's config (sources, destinations,
 * suppressions) and held in memory for the hot paths. `build` may make it
 * anew or bring the one it holds up to date (the suppressions read only
 * what changed: `SuppressionList`). Rebuilt when this
 * process changes the config (callers await {@link reload} before
 * answering) and, by polling the store's config version, when another
 * process does: changes show within `pollMs`.
 */
export class ConfigSnapshot<T, S extends ConfigSource = ConfigSource> {
  private value: T;
  private loadedVersion = -1;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private reloading: Promise<void> | undefined;
  private reloadAgain = false;

  constructor(
    private readonly store: S,
    initial: T,
    private readonly build: (store: S) => Promise<T>,
    private readonly options: { readonly pollMs: number; readonly onError: (error: unknown) => void },
  ) {
    this.value = initial;
  }

  get current(): T {
    return this.value;
  }

  /** The config version the current value was built from (-1 before the first load). */
  get version(): number {
    return this.loadedVersion;
  }

  async start(): Promise<void> {
    await this.reload();
    this.unsubscribe = this.store.subscribe((topic) => {
      if (topic === 'config') this.requestReload();
    });
    this.timer = setInterval(() => this.poll(), this.options.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.unsubscribe?.();
  }

  /** Rebuilds now, or once more after a rebuild already under way. Resolves when current. */
  reload(): Promise<void> {
    if (this.reloading !== undefined) {
      this.reloadAgain = true;
      return this.reloading;
    }
    this.reloading = (async () => {
      try {
        do {
          this.reloadAgain = false;
          await this.load();
        } while (this.reloadAgain);
      } finally {
        this.reloading = undefined;
      }
    })();
    return this.reloading;
  }

  private requestReload(): void {
    this.reload().catch(this.options.onError);
  }

  private poll(): void {
    this.store
      .getConfigVersion()
      .then((version) => {
        if (version !== this.loadedVersion) this.requestReload();
      })
      .catch(this.options.onError);
  }

  private async load(): Promise<void> {
    // The version first: a change committed during the build shows as a
    // newer version at the next poll, so it is never missed.
    const version = await this.store.getConfigVersion();
    this.value = await this.build(this.store);
    this.loadedVersion = version;
  }
}
