import { suppressionReason } from '../domain/regulation.js';
import type { IngestEntry, Store } from '../store/store.js';

/** The suppressions of one user: for every source, and per source; values are regulation ids. */
interface UserSuppressions {
  everySource?: string;
  bySource?: Map<string, string>;
}

/**
 * The suppressions in force, held in memory because ingest checks every
 * message against them. Reloads when this process changes them (the admin
 * calls {@link reload} before answering) and, by polling the store's config
 * version, when another node does: changes show there within `pollMs`.
 * The same pattern as SourceDirectory.
 */
export class SuppressionList {
  private byUser: ReadonlyMap<string, UserSuppressions> = new Map();
  private loadedVersion = -1;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private reloading: Promise<void> | undefined;
  private reloadAgain = false;

  constructor(
    private readonly store: Store,
    private readonly options: { readonly pollMs: number; readonly onError: (error: unknown) => void },
  ) {}

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

  /** The regulation suppressing `userId` on `sourceId`, or undefined. */
  regulationFor(sourceId: string, userId: string): string | undefined {
    const user = this.byUser.get(userId);
    if (user === undefined) return undefined;
    return user.bySource?.get(sourceId) ?? user.everySource;
  }

  /**
   * Ingest's screen: an accepted entry whose user is suppressed on its
   * source is stored as `suppressed`, with the regulation as the reason, and
   * routed nowhere. Other entries pass unchanged (a rejected one keeps the
   * reason that tells the client what it got wrong).
   */
  screen(entries: IngestEntry[]): IngestEntry[] {
    if (this.byUser.size === 0) return entries;
    return entries.map((entry) => {
      if (entry.status !== 'accepted' || entry.userId === undefined) return entry;
      const regulationId = this.regulationFor(entry.sourceId, entry.userId);
      if (regulationId === undefined) return entry;
      return { ...entry, status: 'suppressed', reason: suppressionReason(regulationId), destinations: [] };
    });
  }

  /** Reloads now, or once more after a reload already under way. Resolves when current. */
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
    // The version first: a change committed during the read shows as a newer
    // version at the next poll, so it is never missed.
    const version = await this.store.getConfigVersion();
    const byUser = new Map<string, UserSuppressions>();
    for (const suppression of await this.store.listSuppressions()) {
      let user = byUser.get(suppression.userId);
      if (user === undefined) byUser.set(suppression.userId, (user = {}));
      if (suppression.sourceId === undefined) user.everySource = suppression.regulationId;
      else (user.bySource ??= new Map()).set(suppression.sourceId, suppression.regulationId);
    }
    this.byUser = byUser;
    this.loadedVersion = version;
  }
}
