import type { DestinationFilter } from '../domain/destination-filters.js';
import type { DestinationKind } from '../domain/routing.js';
import { type WebhookDestination, type WebhookOrdering, webhookDestination } from '../domain/webhook-settings.js';
import type { DestinationRecord, SourceRecord } from '../store/store.js';
import { sha256Hex } from '../util/crypto.js';
import { ConfigSnapshot, type ConfigSource } from '../store/config-snapshot.js';

interface Snapshot {
  readonly byKeyHash: ReadonlyMap<string, SourceRecord>;
  readonly byId: ReadonlyMap<string, SourceRecord>;
  readonly destinations: ReadonlyMap<string, ReadonlyMap<DestinationKind, DestinationRecord>>;
  /** Webhooks destinations by source id, settings parsed once per load. */
  readonly webhooks: ReadonlyMap<string, WebhookDestination>;
}

const NO_FILTERS: readonly DestinationFilter[] = [];

const EMPTY: Snapshot = { byKeyHash: new Map(), byId: new Map(), destinations: new Map(), webhooks: new Map() };

/**
 * Sources and their destinations, held in memory for the hot paths (write-key
 * checks, routing, delivery settings); see {@link ConfigSnapshot} for how it
 * stays current.
 */
export class SourceDirectory {
  private readonly snapshot: ConfigSnapshot<Snapshot>;

  constructor(store: ConfigSource, options: { readonly pollMs: number; readonly onError: (error: unknown) => void }) {
    this.snapshot = new ConfigSnapshot(store, EMPTY, loadSnapshot, options);
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

  /**
   * The source whose write key this is. Looked up by the key's SHA-256, so
   * the time taken says nothing about how much of a real key a guess shares:
   * a matching digest already is a match, and comparing the keys again would
   * only repeat, at two more hashes a request, what the digest proved.
   */
  byWriteKey(writeKey: string): SourceRecord | undefined {
    return this.snapshot.current.byKeyHash.get(sha256Hex(writeKey));
  }

  byId(id: string): SourceRecord | undefined {
    return this.snapshot.current.byId.get(id);
  }

  destination(sourceId: string, kind: DestinationKind): DestinationRecord | undefined {
    return this.snapshot.current.destinations.get(sourceId)?.get(kind);
  }

  /** The source's Webhooks destination with its settings parsed (at load, once per settings change). */
  webhooks(sourceId: string): WebhookDestination | undefined {
    return this.snapshot.current.webhooks.get(sourceId);
  }

  /** The filters of the source's Webhooks destination, in order. */
  webhookFilters(sourceId: string): readonly DestinationFilter[] {
    const check = this.webhooks(sourceId)?.check;
    return check?.ok === true ? (check.settings.filters ?? NO_FILTERS) : NO_FILTERS;
  }

  /** The ordering the source's Webhooks destination promises (`none` when it has none). */
  webhookOrdering(sourceId: string): WebhookOrdering {
    const check = this.webhooks(sourceId)?.check;
    return check?.ok === true ? (check.settings.ordering ?? 'none') : 'none';
  }

  /** Kinds of the source's destinations that are enabled. */
  enabledDestinations(sourceId: string): DestinationKind[] {
    const all = this.snapshot.current.destinations.get(sourceId);
    if (all === undefined) return [];
    return [...all.values()].filter((d) => d.enabled).map((d) => d.kind);
  }
}

async function loadSnapshot(store: ConfigSource): Promise<Snapshot> {
  const [sources, destinations] = await Promise.all([store.listSources(), store.listDestinations()]);
  const byDestination = new Map<string, Map<DestinationKind, DestinationRecord>>();
  const webhooks = new Map<string, WebhookDestination>();
  for (const destination of destinations) {
    if (destination.kind === 'webhooks') webhooks.set(destination.sourceId, webhookDestination(destination));
    let kinds = byDestination.get(destination.sourceId);
    if (kinds === undefined) byDestination.set(destination.sourceId, (kinds = new Map<DestinationKind, DestinationRecord>()));
    kinds.set(destination.kind, destination);
  }
  return {
    byKeyHash: new Map(sources.map((s) => [sha256Hex(s.writeKey), s])),
    byId: new Map(sources.map((s) => [s.id, s])),
    destinations: byDestination,
    webhooks,
  };
}
