import { ConfigSnapshot, type ConfigSource } from '../store/config-snapshot.js';
import type { RegulationStore, SuppressionChange } from '../store/store.js';

/** What the list reads: the suppression rows changed since it last read, and the config version that tells when to look. */
type SuppressionSource = ConfigSource & Pick<RegulationStore, 'listSuppressionChanges'>;

/** The suppressions of one user: for every source, and per source; values are regulation ids. */
interface UserSuppressions {
  everySource?: string | undefined;
  bySource?: Map<string, string> | undefined;
}

type ByUser = Map<string, UserSuppressions>;

/** Rows read a query: a large backlog (a first load of 100,000s) is read in pages, the event loop free between them. */
const PAGE_ROWS = 5_000;

/**
 * The suppressions in force, held in memory because ingest checks every
 * message against them; see {@link ConfigSnapshot} for when it looks for
 * changes (the admin calls {@link reload} before answering a request). It
 * reads only the rows changed since it last read (by their seq, lifts
 * included; see `RegulationStore.listSuppressionChanges`), and applies them
 * to the map it holds: a config change that is not a suppression (a source
 * renamed) reads no row, one new suppressed user reads one. Only the first
 * load reads them all.
 */
export class SuppressionList {
  private readonly byUser: ByUser = new Map();
  private readonly snapshot: ConfigSnapshot<ByUser, SuppressionSource>;
  /** The highest seq applied. */
  private seq = 0;
  private read = 0;

  constructor(store: SuppressionSource, options: { readonly pollMs: number; readonly onError: (error: unknown) => void }) {
    this.snapshot = new ConfigSnapshot<ByUser, SuppressionSource>(store, this.byUser, (source) => this.catchUp(source), options);
  }

  start(): Promise<void> {
    return this.snapshot.start();
  }

  stop(): void {
    this.snapshot.stop();
  }

  /** Reads the changes now, or once more after a read already under way. Resolves when current. */
  reload(): Promise<void> {
    return this.snapshot.reload();
  }

  /** The config version it was loaded from: ingest stores it with each raw request (see `raw-processor.ts`). */
  get configVersion(): number {
    return this.snapshot.version;
  }

  /** Suppression rows read from the store since it started: what a reload cost. */
  get rowsRead(): number {
    return this.read;
  }

  /** The regulation suppressing `userId` on `sourceId`, or undefined. */
  regulationFor(sourceId: string, userId: string): string | undefined {
    const user = this.byUser.get(userId);
    if (user === undefined) return undefined;
    return user.bySource?.get(sourceId) ?? user.everySource;
  }

  /**
   * Applies every change after the highest seq applied. Reloads run one at a
   * time (ConfigSnapshot), so the seq is never read by two at once; a failure
   * part way keeps the pages applied, and the next reload goes on from there.
   */
  private async catchUp(store: SuppressionSource): Promise<ByUser> {
    for (;;) {
      const changes = await store.listSuppressionChanges(this.seq, PAGE_ROWS);
      for (const change of changes) this.apply(change);
      this.read += changes.length;
      if (changes.length > 0) this.seq = changes[changes.length - 1]!.seq;
      if (changes.length < PAGE_ROWS) return this.byUser;
    }
  }

  private apply(change: SuppressionChange): void {
    const { userId, sourceId, regulationId } = change;
    let user = this.byUser.get(userId);
    if (change.lifted) {
      if (user === undefined) return;
      if (sourceId === undefined) user.everySource = undefined;
      else if (user.bySource?.delete(sourceId) === true && user.bySource.size === 0) user.bySource = undefined;
      if (user.everySource === undefined && user.bySource === undefined) this.byUser.delete(userId);
      return;
    }
    if (user === undefined) this.byUser.set(userId, (user = {}));
    if (sourceId === undefined) user.everySource = regulationId;
    else (user.bySource ??= new Map()).set(sourceId, regulationId);
  }
}
