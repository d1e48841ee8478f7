import { setImmediate as nextTurn } from 'node:timers/promises';
import { type HeaderDefaults, applyHeaderDefaults } from '../domain/browser-settings.js';
import { type CallType, DEDUPLICATION_WINDOW_MS, type JsonObject } from '../domain/message.js';
import type { WebhookDestination } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { TraceSpan, Tracing } from '../telemetry/tracing.js';
import { type AppendResult, type ChangeFeed, type IngestEntry, type IngestStore, ProcessingLockNeeded, type RawRequest } from '../store/store.js';
import { PassLoop } from '../util/pass-loop.js';
import { entriesForBatch, entriesForCall } from './build-entries.js';

/** What the processor needs of the suppressions (`SuppressionList`). */
export interface SuppressionScreen {
  regulationFor(sourceId: string, userId: string): string | undefined;
  readonly configVersion: number;
  reload(): Promise<void>;
}

export interface RawProcessorOptions {
  readonly store: Pick<IngestStore, 'processRawRequests'> & ChangeFeed;
  /** Kept at least as current as the config each raw request was taken with (see {@link RawProcessor}). */
  readonly directory: SourceDirectory;
  readonly suppressions: SuppressionScreen;
  readonly metrics: Metrics;
  readonly now: () => number;
  readonly newMessageId: () => string;
  /** How often to look for raw requests without a notification (other nodes', missed ones). */
  readonly pollMs: number;
  /**
   * How long raw requests stored after a pass gather before the next one
   * takes them (0 or undefined: at once). See {@link RawProcessor}.
   */
  readonly gatherMs?: number;
  readonly onError: (error: unknown) => void;
  /** Called each time processing has caught up (nothing left to take): deletion steps wait for that. */
  readonly onCaughtUp?: () => void;
  /** On: a span per raw request processed, child of its request's span, whose traceparent the messages keep. */
  readonly tracing?: Tracing | undefined;
}

/** What ingest stores of a request's headers (see tracking-api.ts). */
type StoredHeaders = HeaderDefaults & { readonly traceparent?: string | undefined };

/**
 * Raw requests per processing transaction, and messages: on SQLite the
 * transaction holds the write lock, which ingest's commits wait for (and with
 * `--workers 0` it runs on ingest's own event loop), so it stays short: 500
 * messages held it ~12 ms with their entries built inside, ~9 ms now that
 * the embedded store builds them before taking the lock. 1,000 spread each
 * commit's fixed cost (begin, WAL write, the raw rows' reads and delete) over
 * more messages, ~30 → ~26 µs of CPU per message in `ingest.batch`, but
 * doubled the hold; the hold is what ingest's p99 pays.
 */
const LIMITS = { maxRequests: 500, maxMessages: 500 } as const;

/**
 * A destination with a transformation gets its deliveries created
 * `transforming`: the transform stage runs the code later, outside this
 * transaction (user code may take seconds; this holds the write lock).
 */
function withTransformation(entries: IngestEntry[], webhooks: WebhookDestination | undefined): IngestEntry[] {
  if (webhooks?.check.ok !== true || webhooks.check.settings.transformation === undefined) return entries;
  return entries.map((entry) => (entry.status === 'accepted' && entry.destinations.includes('webhooks') ? { ...entry, transforming: true } : entry));
}

/** Ends the spans of a processing transaction, failed with `failure` when it did not commit for good. */
function endSpans(spans: readonly TraceSpan[], failure: string | undefined): void {
  for (const span of spans) {
    span.setAttribute('switchyard.batch.requests', spans.length);
    if (failure !== undefined) span.fail(failure);
    span.end();
  }
}

/** Thrown inside the processing transaction (which rolls it back) when a raw request needs a newer config than loaded. */
class ConfigBehind extends Error {
  constructor(readonly version: number) {
    super(`config version ${version} not loaded yet`);
  }
}

/**
 * The processing stage: turns the raw requests ingest stored before its 200
 * into messages, in seq order, with today's rules (`build-entries.ts`:
 * rejected, filtered, suppressed, accepted, routing; `duplicate` decided by
 * the store), in one transaction per batch that also deletes the raw rows,
 * so a crash leaves each raw request either wholly processed or untouched.
 *
 * Routing and the suppression screen use this thread's `SourceDirectory`
 * and `SuppressionList`, reloaded first whenever a raw request was taken
 * with a newer config version than they hold: the admin answers a change
 * only once ingest's copy has it, so a destination or suppression answered
 * before a request always applies to it.
 */
export class RawProcessor {
  private readonly loop: PassLoop;
  private unsubscribe: (() => void) | undefined;
  /** The pass a `raw` notification asked for, waiting for `gatherMs`. */
  private gathering: NodeJS.Timeout | undefined;

  constructor(private readonly options: RawProcessorOptions) {
    this.loop = new PassLoop(() => this.drain(), options.pollMs, options.onError);
  }

  start(): void {
    this.unsubscribe = this.options.store.subscribe((topic) => {
      if (topic === 'raw') this.rawStored();
    });
    this.loop.start();
  }

  /**
   * A commit stored raw requests. Under load every group commit of ingest
   * notifies, and a pass per notification makes one small transaction per
   * commit, whose fixed cost (~10 pages written to the WAL, locks, the
   * stages it wakes) was most of the CPU per message; waiting `gatherMs`
   * lets the requests of several commits go into one pass. Nothing
   * acknowledged waits on it (the 200 went with the raw commit): only the
   * messages' delivery and Engage start that much later.
   */
  private rawStored(): void {
    const gatherMs = this.options.gatherMs ?? 0;
    if (gatherMs <= 0) {
      this.wake();
      return;
    }
    this.gathering ??= setTimeout(() => {
      this.gathering = undefined;
      this.wake();
    }, gatherMs);
  }

  /** Processes now, or once more after the pass under way. */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    clearTimeout(this.gathering);
    this.gathering = undefined;
    await this.loop.stop();
  }

  /**
   * Batches until none is left; yields between batches so that the loop's
   * other work (ingest, with --workers 0) goes on. A batch that took every
   * raw request there was ends it without another (empty) transaction: one
   * stored after it notifies `raw`, which makes another pass.
   */
  private async drain(): Promise<void> {
    for (;;) {
      if (this.loop.isStopped) return;
      if (await this.processBatch()) break;
      await nextTurn();
    }
    this.options.onCaughtUp?.();
  }

  /** Resolves whether the batch took every raw request there was (see RawProcessed.caughtUp). */
  private async processBatch(): Promise<boolean> {
    const { store, now } = this.options;
    let ordered = this.options.directory.anyOrderedWebhooks();
    for (let tries = 0; ; tries++) {
      // Plans compile here, outside the transaction (once per plan version).
      this.options.directory.compileTrackingPlans();
      const spans: TraceSpan[] = [];
      try {
        const build = (rows: readonly RawRequest[]): IngestEntry[][] => rows.map((row) => this.tracedEntriesFor(row, tries === 0, spans));
        const { results, caughtUp } = await store.processRawRequests(LIMITS, build, now() - DEDUPLICATION_WINDOW_MS, { ordered });
        endSpans(spans, undefined);
        this.count(results);
        return caughtUp;
      } catch (error) {
        const lockNeeded = error instanceof ProcessingLockNeeded && tries <= 2;
        const retried = lockNeeded || (error instanceof ConfigBehind && tries <= 2);
        endSpans(spans, retried ? undefined : `processing failed: ${String(error)}`);
        if (!retried) throw error;
        if (lockNeeded) {
          // An ordered destination appeared while the batch was built: again, under the lock.
          ordered = true;
          continue;
        }
        await Promise.all([this.options.directory.reload(), this.options.suppressions.reload()]);
        ordered = this.options.directory.anyOrderedWebhooks();
      }
    }
  }

  /**
   * {@link entriesFor}, in a span of its own when tracing is on (ended with
   * the batch's commit): a child of the request's span, and the parent of
   * every span its messages' deliveries make, through the traceparent
   * stored with each message.
   */
  private tracedEntriesFor(row: RawRequest, firstTry: boolean, spans: TraceSpan[]): IngestEntry[] {
    const tracing = this.options.tracing;
    if (tracing?.enabled !== true) return this.entriesFor(row, firstTry);
    const stored = row.headers === undefined ? undefined : (JSON.parse(row.headers) as StoredHeaders).traceparent;
    const span = tracing.startSpan('process', {
      kind: 'consumer',
      parent: stored,
      attributes: { 'switchyard.source.id': row.sourceId, 'switchyard.raw_request.seq': row.seq, 'switchyard.message.count': row.messageCount },
    });
    spans.push(span);
    const traceparent = span.traceparent;
    const entries = this.entriesFor(row, firstTry);
    let accepted = 0;
    for (const entry of entries) if (entry.status === 'accepted') accepted++;
    span.setAttribute('switchyard.message.accepted', accepted);
    return entries.map((entry) => ({ ...entry, traceparent }));
  }

  /** The entries of one raw request; what ingest would have built before its 200. */
  private entriesFor(row: RawRequest, firstTry: boolean): IngestEntry[] {
    const { directory, suppressions } = this.options;
    if (directory.configVersion < row.configVersion || suppressions.configVersion < row.configVersion) throw new ConfigBehind(row.configVersion);
    const source = directory.byId(row.sourceId);
    if (source === undefined) {
      // Ingest's copy may hold a source created during its last load, past
      // the version it records: reload once before taking it as deleted.
      if (firstTry) throw new ConfigBehind(row.configVersion);
      // Deleted since (with its messages): its raw requests go with it.
      return [];
    }
    try {
      const body = JSON.parse(row.body) as JsonObject;
      const kind = row.route === 'batch' ? 'batch' : 'call';
      if (row.headers !== undefined) applyHeaderDefaults(body, kind, JSON.parse(row.headers) as HeaderDefaults);
      const facts = {
        source,
        destinations: directory.enabledDestinations(source.id),
        functions: directory.enabledFunctions(source.id),
        webhookFilters: directory.webhookFilters(source.id),
        orderedWebhooks: directory.webhookOrdering(source.id) === 'user',
        receivedAt: row.receivedAt,
        receivedAtIso: new Date(row.receivedAt).toISOString(),
        ip: row.ip,
        newMessageId: this.options.newMessageId,
        suppressedBy: (sourceId: string, userId: string) => suppressions.regulationFor(sourceId, userId),
        trackingPlan: directory.trackingPlan(source.id),
      };
      // Ingest checked the whole-body limits before its 200; bodyBytes 0 skips them here.
      const entries = kind === 'batch' ? entriesForBatch(body, 0, facts) : entriesForCall(body, row.route as CallType, facts);
      return withTransformation(entries, directory.webhooks(source.id));
    } catch (error) {
      // Building is pure, so an error would recur on every retry and block
      // every later request (e.g. a batch context nested deep enough to
      // overflow the stack passes ingest's checks): the request is stored as
      // rejected, with the reason, and the failure logged.
      const reason = (error instanceof ApiError ? error.message : `the request could not be processed: ${String(error)}`).slice(0, 500);
      if (!(error instanceof ApiError)) this.options.onError(new Error(`raw request ${row.seq} of source ${row.sourceId} stored as rejected: ${reason}`, { cause: error }));
      return [{ sourceId: source.id, status: 'rejected', reason, type: undefined, messageId: undefined, userId: undefined, receivedAt: row.receivedAt, body: row.body, destinations: [] }];
    }
  }

  /** One counter increment per status and batch, not per message. */
  private count(results: readonly AppendResult[]): void {
    const counts = new Map<string, number>();
    for (const result of results) counts.set(result.status, (counts.get(result.status) ?? 0) + 1);
    for (const [status, n] of counts) this.options.metrics.ingestMessages.inc({ status }, n);
  }
}
