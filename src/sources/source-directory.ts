import type { DestinationKind } from '../domain/routing.js';
import type { DestinationRecord, SourceRecord, Store } from '../store/store.js';
import { constantTimeEqual, sha256Hex } from '../util/crypto.js';

interface Snapshot {
  readonly byKeyHash: ReadonlyMap<string, SourceRecord>;
  readonly byId: ReadonlyMap<string, SourceRecord>;
  readonly destinations: ReadonlyMap<string, ReadonlyMap<DestinationKind, DestinationRecord>>;
}

const EMPTY: Snapshot = { byKeyHash: new Map(), byId: new Map(), destinations: new Map() };

/**
 * Sources and their destinations, held in memory for the hot paths (write-key
 * checks, routing, delivery settings). Reloads when this process changes the
 * config and, by polling the store's config version, when another process
 * (a CLI, another node) does: changes show within `pollMs`.
 */
export class SourceDirectory {
  private snapshot: Snapshot = EMPTY;
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

  /** The source whose write key this is, compared in constant time. */
  byWriteKey(writeKey: string): SourceRecord | undefined {
    const source = this.snapshot.byKeyHash.get(sha256Hex(writeKey));
    return source !== undefined && constantTimeEqual(source.writeKey, writeKey) ? source : undefined;
  }

  byId(id: string): SourceRecord | undefined {
    return this.snapshot.byId.get(id);
  }

  destination(sourceId: string, kind: DestinationKind): DestinationRecord | undefined {
    return this.snapshot.destinations.get(sourceId)?.get(kind);
  }

  /** Kinds of the source's destinations that are enabled. */
  enabledDestinations(sourceId: string): DestinationKind[] {
    const all = this.snapshot.destinations.get(sourceId);
    if (all === undefined) return [];
    return [...all.values()].filter((d) => d.enabled).map((d) => d.kind);
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
    const version = await this.store.getConfigVersion();
    const [sources, destinations] = await Promise.all([this.store.listSources(), this.store.listDestinations()]);
    const byDestination = new Map<string, Map<DestinationKind, DestinationRecord>>();
    for (const destination of destinations) {
      let kinds = byDestination.get(destination.sourceId);
      if (kinds === undefined) byDestination.set(destination.sourceId, (kinds = new Map<DestinationKind, DestinationRecord>()));
      kinds.set(destination.kind, destination);
    }
    this.snapshot = {
      byKeyHash: new Map(sources.map((s) => [sha256Hex(s.writeKey), s])),
      byId: new Map(sources.map((s) => [s.id, s])),
      destinations: byDestination,
    };
    this.loadedVersion = version;
  }
}
