import { AggregatorRegistry, Counter, Gauge, Histogram, type MetricObjectWithValues, type MetricValue, Registry, collectDefaultMetrics } from 'prom-client';

type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/** The heap of one transformation's or function destination's isolates. */
export interface SandboxHeap {
  readonly kind: 'transformation' | 'function';
  readonly id: string;
  readonly bytes: number;
}

/** The Prometheus metrics of one process, served at GET /metrics. */
export class Metrics {
  readonly registry = new Registry();

  readonly ingestRequests = new Counter({
    name: 'switchyard_ingest_requests_total',
    help: 'Tracking API requests by HTTP status code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  readonly ingestMessages = new Counter({
    name: 'switchyard_ingest_messages_total',
    help: 'Messages received, by the status ingest gave them',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  readonly groupCommitSize = new Histogram({
    name: 'switchyard_group_commit_entries',
    help: 'Messages per ingest commit',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500],
    registers: [this.registry],
  });

  readonly groupCommitSeconds = new Histogram({
    name: 'switchyard_group_commit_seconds',
    help: 'Time to commit one group of messages',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  readonly deliveryAttempts = new Counter({
    name: 'switchyard_delivery_attempts_total',
    help: 'POSTs to webhook receivers by outcome (2xx, 4xx, 5xx, timeout, error, refused)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly deliveriesFinished = new Counter({
    name: 'switchyard_deliveries_finished_total',
    help: 'Deliveries that reached a final status',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  readonly deliveryLagSeconds = new Histogram({
    name: 'switchyard_delivery_lag_seconds',
    help: 'Time from a message being stored to its delivery succeeding',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 300, 3600],
    registers: [this.registry],
  });

  /** Read at scrape time; see {@link watchCircuits}. */
  private readonly circuitReaders = new Set<() => { receiver: number; function: number }>();

  /**
   * Labelled by kind only: a label per receiver origin would be a series per
   * customer's host (unbounded, and naming them); which targets are held is
   * in the admin API (`GET /deliveries/:id`, `heldBy`).
   */
  readonly circuitsHeld: Gauge<'kind'> = new Gauge({
    name: 'switchyard_delivery_circuits_open',
    help: 'Circuits this node\'s delivery worker holds open or half-open (their deliveries wait in the queue, no attempt recorded), by kind: receiver (one per origin) or function (one per function destination)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
    collect: () => {
      let receiver = 0;
      let fn = 0;
      for (const read of this.circuitReaders) {
        const counts = read();
        receiver += counts.receiver;
        fn += counts.function;
      }
      this.circuitsHeld.set({ kind: 'receiver' }, receiver);
      this.circuitsHeld.set({ kind: 'function' }, fn);
    },
  });

  readonly circuitsOpened = new Counter({
    name: 'switchyard_delivery_circuits_opened_total',
    help: 'Times a closed circuit opened (failures in a row), by kind: receiver or function (a failed probe keeping it open is not counted)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly transformRuns = new Counter({
    name: 'switchyard_transformation_runs_total',
    help: 'Messages a transformation ran on, by transformation id and outcome (output, dropped, error, timeout, memory)',
    labelNames: ['transformation', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly transformSeconds = new Histogram({
    name: 'switchyard_transformation_duration_seconds',
    help: 'Time of one transformation call (awaited promises included), by transformation id',
    labelNames: ['transformation'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 4],
    registers: [this.registry],
  });

  /** Read at scrape time; see {@link watchSandboxHeaps}. */
  private readonly sandboxHeapReaders = new Set<() => Promise<readonly SandboxHeap[]>>();

  readonly sandboxHeap: Gauge<'kind' | 'id'> = new Gauge({
    name: 'switchyard_sandbox_heap_bytes',
    help: 'Heap in use of the isolates of each transformation (kind "transformation") and function destination (kind "function") on this node, all its live versions together',
    labelNames: ['kind', 'id'] as const,
    registers: [this.registry],
    collect: async () => {
      const heaps = (await Promise.all([...this.sandboxHeapReaders].map((read) => read()))).flat();
      this.sandboxHeap.reset();
      for (const heap of heaps) this.sandboxHeap.inc({ kind: heap.kind, id: heap.id }, heap.bytes);
    },
  });

  readonly connectionsCut = new Counter({
    name: 'switchyard_http_connections_cut_total',
    help: 'Connections the server cut: pipeline_too_deep (more requests waiting than allowed), stalled (answers not read)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly connectionsRefused = new Counter({
    name: 'switchyard_http_connections_refused_total',
    help: 'Connections refused as they were accepted, answered 503 overloaded with nothing read: total (the server held SWITCHYARD_MAX_CONNECTIONS), per_address (their address held SWITCHYARD_MAX_CONNECTIONS_PER_ADDRESS)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  private readonly connectionsOpen = new ScrapedGauge(
    this.registry,
    'switchyard_http_connections_open',
    'Connections the HTTP server holds now, this scrape\'s own included (refused ones are not held)',
  );

  private readonly ingestBacklog = new ScrapedGauge(this.registry, 'switchyard_ingest_commit_backlog', 'Messages waiting for the next ingest commit');

  private readonly ingestBodyBytes = new ScrapedGauge(
    this.registry,
    'switchyard_ingest_body_bytes_reading',
    'Bytes reserved for Tracking API request bodies being read now (bounded: past 64 MB, or 16 MB from one address, requests get 503)',
  );

  /** Read at scrape time; see {@link watchProcessingBacklog}. */
  private readProcessingBacklog: () => { messages: number; lagMs: number } = () => ({ messages: 0, lagMs: 0 });

  readonly unprocessedMessages: Gauge = new Gauge({
    name: 'switchyard_ingest_unprocessed_messages',
    help: 'Messages acknowledged (stored raw) but not yet processed into messages, every node\'s on a shared store',
    registers: [this.registry],
    collect: () => {
      this.unprocessedMessages.set(this.readProcessingBacklog().messages);
    },
  });

  readonly processingLag: Gauge = new Gauge({
    name: 'switchyard_ingest_processing_lag_seconds',
    help: 'How long the oldest acknowledged but unprocessed request has waited',
    registers: [this.registry],
    collect: () => {
      this.processingLag.set(this.readProcessingBacklog().lagMs / 1000);
    },
  });

  /** Read at scrape time; see {@link watchEngageLag}. */
  private readEngageLag: () => Promise<number> = () => Promise.resolve(0);

  readonly engageLag: Gauge = new Gauge({
    name: 'switchyard_engage_lag_seconds',
    help: 'How long the oldest stored message that Engage has not evaluated yet has waited since it was received (0 when caught up); the same on every node of a shared store',
    registers: [this.registry],
    collect: async () => {
      this.engageLag.set(await this.readEngageLag());
    },
  });

  /** Other threads' metrics (the stage thread's), summed into every scrape. */
  private readonly forwarded: Array<() => Promise<MetricsSnapshot>> = [];

  /** `processMetrics: false` in the stage thread: CPU and memory are per process, reported once. */
  constructor(options: { readonly processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'switchyard_' });
  }

  /** Adds another thread's metrics to {@link render}; same-named series are summed. */
  forward(read: () => Promise<MetricsSnapshot>): void {
    this.forwarded.push(read);
  }

  /** The Prometheus text of this thread's metrics plus every forwarded thread's. */
  async render(): Promise<string> {
    if (this.forwarded.length === 0) return this.registry.metrics();
    const snapshots = await Promise.all([this.registry.getMetricsAsJSON(), ...this.forwarded.map((read) => read())]);
    return AggregatorRegistry.aggregate(snapshots).metrics();
  }

  /** The backlog changes with every request: reading it when scraped costs nothing per request. */
  watchCommitBacklog(read: () => number): void {
    this.ingestBacklog.watch(read);
  }

  watchOpenConnections(read: () => number): void {
    this.connectionsOpen.watch(read);
  }

  watchBodiesReading(read: () => number): void {
    this.ingestBodyBytes.watch(read);
  }

  /** Adds a source of `switchyard_sandbox_heap_bytes`, read at scrape time; returns how to remove it. */
  watchSandboxHeaps(read: () => Promise<readonly SandboxHeap[]>): () => void {
    this.sandboxHeapReaders.add(read);
    return () => this.sandboxHeapReaders.delete(read);
  }

  /** Adds a source of `switchyard_delivery_circuits_open` (a delivery worker's breaker), read at scrape time; returns how to remove it. */
  watchCircuits(read: () => { receiver: number; function: number }): () => void {
    this.circuitReaders.add(read);
    return () => this.circuitReaders.delete(read);
  }

  /** How far behind Engage is (see engage/engage-lag.ts); set on the main thread only: the stage thread's zero adds nothing to the sum. */
  watchEngageLag(read: () => Promise<number>): void {
    this.readEngageLag = read;
  }

  /** The processing backlog as ingest last read it (see `ingest/processing-backlog.ts`). */
  watchProcessingBacklog(read: () => { messages: number; lagMs: number }): void {
    this.readProcessingBacklog = read;
  }
}

/** A gauge whose value is read at scrape time from what {@link watch} gave it (0 until then): a count the server holds anyway. */
class ScrapedGauge {
  private read: () => number = () => 0;

  constructor(registry: Registry, name: string, help: string) {
    const gauge: Gauge = new Gauge({
      name,
      help,
      registers: [registry],
      collect: () => {
        gauge.set(this.read());
      },
    });
  }

  watch(read: () => number): void {
    this.read = read;
  }
}
