import { ConfigSnapshot, type ConfigSource } from '../store/config-snapshot.js';
import type { RegulationStore } from '../store/store.js';

/** What the list reads: the suppressions, and the config version that tells when they changed. */
type SuppressionSource = ConfigSource & Pick<RegulationStore, 'listSuppressions'>;

/** The suppressions of one user: for every source, and per source; values are regulation ids. */
interface UserSuppressions {
  everySource?: string;
  bySource?: Map<string, string>;
}

type ByUser = ReadonlyMap<string, UserSuppressions>;

/**
 * The suppressions in force, held in memory because ingest checks every
 * message against them; see {@link ConfigSnapshot} for how it stays current
 * (the admin calls {@link reload} before answering a request).
 */
export class SuppressionList {
  private readonly snapshot: ConfigSnapshot<ByUser, SuppressionSource>;

  constructor(store: SuppressionSource, options: { readonly pollMs: number; readonly onError: (error: unknown) => void }) {
    this.snapshot = new ConfigSnapshot<ByUser, SuppressionSource>(store, new Map(), loadSuppressions, options);
  }

  start(): Promise<void> {
    return this.snapshot.start();
  }

  stop(): void {
    this.snapshot.stop();
  }

  /** Reloads now, or once more after a reload already under way. Resolves when current. */
  reload(): Promise<void> {
    return this.snapshot.reload();
  }

  /** The config version it was loaded from: ingest stores it with each raw request (see `raw-processor.ts`). */
  get configVersion(): number {
    return this.snapshot.version;
  }

  /** The regulation suppressing `userId` on `sourceId`, or undefined. */
  regulationFor(sourceId: string, userId: string): string | undefined {
    const user = this.snapshot.current.get(userId);
    if (user === undefined) return undefined;
    return user.bySource?.get(sourceId) ?? user.everySource;
  }
}

async function loadSuppressions(store: SuppressionSource): Promise<ByUser> {
  const byUser = new Map<string, UserSuppressions>();
  for (const suppression of await store.listSuppressions()) {
    let user = byUser.get(suppression.userId);
    if (user === undefined) byUser.set(suppression.userId, (user = {}));
    if (suppression.sourceId === undefined) user.everySource = suppression.regulationId;
    else (user.bySource ??= new Map()).set(suppression.sourceId, suppression.regulationId);
  }
  return byUser;
}
