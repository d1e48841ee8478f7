import type { DestinationFilter } from '../domain/destination-filters.js';
import { type DestinationKind, type FunctionTarget, functionTarget } from '../domain/routing.js';
import { type WebhookDestination, type WebhookOrdering, webhookDestination } from '../domain/webhook-settings.js';
import type { DestinationRecord, FunctionDestinationRecord, FunctionStore, SourceRecord, TrackingPlanRecord, TrackingPlanStore } from '../store/store.js';
import { sha256Hex } from '../util/crypto.js';
import { ConfigSnapshot, type ConfigSource } from '../store/config-snapshot.js';
import { type CompiledPlan, type TrackingPlanDefinition, compileTrackingPlan } from '../domain/tracking-plan.js';

type DirectorySource = ConfigSource & Pick<TrackingPlanStore, 'listTrackingPlans'> & Pick<FunctionStore, 'listFunctionDestinations'>;

/** An enabled function destination as routing needs it: its delivery target and its integrations key. */
export interface RoutedFunction {
  readonly target: FunctionTarget;
  readonly name: string;
}

interface Snapshot {
  readonly byKeyHash: ReadonlyMap<string, SourceRecord>;
  readonly byId: ReadonlyMap<string, SourceRecord>;
  readonly destinations: ReadonlyMap<string, ReadonlyMap<DestinationKind, DestinationRecord>>;
  /** Webhooks destinations by source id, settings parsed once per load. */
  readonly webhooks: ReadonlyMap<string, WebhookDestination>;
  /** The current tracking plan of each source that has one (compiled on first use: see `trackingPlan`). */
  readonly plans: ReadonlyMap<string, TrackingPlanRecord>;
  /** Function destinations by id, and the enabled ones of each source (oldest first). */
  readonly functions: ReadonlyMap<string, FunctionDestinationRecord>;
  readonly enabledFunctions: ReadonlyMap<string, readonly RoutedFunction[]>;
}

const NO_FILTERS: readonly DestinationFilter[] = [];

const EMPTY: Snapshot = { byKeyHash: new Map(), byId: new Map(), destinations: new Map(), webhooks: new Map(), plans: new Map(), functions: new Map(), enabledFunctions: new Map() };
const NO_FUNCTIONS: readonly RoutedFunction[] = [];

/**
 * Sources and their destinations, held in memory for the hot paths (write-key
 * checks, routing, delivery settings); see {@link ConfigSnapshot} for how it
 * stays current.
 */
export class SourceDirectory {
  private readonly snapshot: ConfigSnapshot<Snapshot, DirectorySource>;
  /**
   * Compiled plans by source, each with the version it was compiled from:
   * a plan is compiled once per version, on the first message that needs it
   * (ingest, which never checks plans, never compiles one), and kept across
   * reloads while its version stays current.
   */
  private readonly compiled = new Map<string, { readonly record: TrackingPlanRecord; readonly plan: CompiledPlan | undefined }>();
  /** {@link anyOrderedWebhooks} and {@link anyTransformations} of one loaded snapshot. */
  private summary: { readonly of: Snapshot; readonly ordered: boolean; readonly transformed: boolean } | undefined;

  constructor(
    store: DirectorySource,
    private readonly options: { readonly pollMs: number; readonly onError: (error: unknown) => void }) {
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

  /**
   * The source's current tracking plan, compiled (once per plan version), or
   * undefined when it has none. A stored plan that no longer compiles (saved
   * by another release) is reported once and not applied.
   */
  trackingPlan(sourceId: string): CompiledPlan | undefined {
    const record = this.snapshot.current.plans.get(sourceId);
    if (record === undefined) {
      if (this.compiled.size > 0) this.compiled.delete(sourceId);
      return undefined;
    }
    const cached = this.compiled.get(sourceId);
    if (cached !== undefined && cached.record.id === record.id && cached.record.version === record.version) return cached.plan;
    let plan: CompiledPlan | undefined;
    try {
      plan = compileTrackingPlan(record.id, record.version, JSON.parse(record.plan) as TrackingPlanDefinition);
    } catch (error) {
      this.options.onError(new Error(`tracking plan ${record.id} version ${record.version} of source ${sourceId} does not compile; not applied`, { cause: error }));
    }
    this.compiled.set(sourceId, { record, plan });
    return plan;
  }

  /**
   * Compiles every current plan not compiled yet. Processing calls it before
   * its transaction, so that compiling (milliseconds to a second for a large
   * plan) never holds the store's write lock.
   */
  compileTrackingPlans(): void {
    for (const sourceId of this.snapshot.current.plans.keys()) this.trackingPlan(sourceId);
  }

  /** The ordering the source's Webhooks destination promises (`none` when it has none). */
  webhookOrdering(sourceId: string): WebhookOrdering {
    const check = this.webhooks(sourceId)?.check;
    return check?.ok === true ? (check.settings.ordering ?? 'none') : 'none';
  }

  /** A function destination by id (enabled or not), its settings unmasked: the delivery worker's view. */
  functionDestination(id: string): FunctionDestinationRecord | undefined {
    return this.snapshot.current.functions.get(id);
  }

  /** The source's enabled function destinations, oldest first. */
  enabledFunctions(sourceId: string): readonly RoutedFunction[] {
    return this.snapshot.current.enabledFunctions.get(sourceId) ?? NO_FUNCTIONS;
  }

  /**
   * Whether some source's enabled Webhooks destination promises order per
   * user. Processing on PostgreSQL serializes across nodes only then (see
   * `processRawRequests`); without ordered destinations nodes process side
   * by side.
   */
  anyOrderedWebhooks(): boolean {
    return this.summarize().ordered;
  }

  /**
   * Whether some source's enabled Webhooks destination has a transformation
   * attached: only then does processing create deliveries that wait for
   * one, so the transform stage looks for them on every new delivery only
   * then (its poll still finds any left from before).
   */
  anyTransformations(): boolean {
    return this.summarize().transformed;
  }

  private summarize(): { readonly ordered: boolean; readonly transformed: boolean } {
    const current = this.snapshot.current;
    if (this.summary?.of !== current) {
      const settings = [...current.webhooks.values()].flatMap((d) => (d.enabled && d.check.ok ? [d.check.settings] : []));
      this.summary = {
        of: current,
        ordered: settings.some((s) => s.ordering === 'user'),
        transformed: settings.some((s) => s.transformation !== undefined),
      };
    }
    return this.summary;
  }

  /** Kinds of the source's destinations that are enabled. */
  enabledDestinations(sourceId: string): DestinationKind[] {
    const all = this.snapshot.current.destinations.get(sourceId);
    if (all === undefined) return [];
    return [...all.values()].filter((d) => d.enabled).map((d) => d.kind);
  }
}

async function loadSnapshot(store: DirectorySource): Promise<Snapshot> {
  const [sources, destinations, plans, functionList] = await Promise.all([store.listSources(), store.listDestinations(), store.listTrackingPlans(), store.listFunctionDestinations()]);
  const enabledFunctions = new Map<string, RoutedFunction[]>();
  for (const fn of functionList) {
    if (!fn.enabled) continue;
    let list = enabledFunctions.get(fn.sourceId);
    if (list === undefined) enabledFunctions.set(fn.sourceId, (list = []));
    list.push({ target: functionTarget(fn.id), name: fn.name });
  }
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
    plans: new Map(plans.map((p) => [p.sourceId, p])),
    functions: new Map(functionList.map((f) => [f.id, f])),
    enabledFunctions,
  };
}
