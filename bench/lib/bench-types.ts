import type { CpuPlan } from './cpu-plan.js';
import type { Target } from './target.js';

export type StoreKind = 'sqlite' | 'postgres';

/** Settings shared by every bench of one `npm run bench`. */
export interface RunOptions {
  /** Measured seconds per side of a comparison (split over the rounds). */
  readonly durationSec: number;
  /** A comparison alternates baseline and Switchyard this many times each. */
  readonly rounds: number;
  readonly warmupSec: number;
  readonly connections: number;
  readonly store: StoreKind;
  /** Admin connection used to create and drop a scratch database for `--store postgres`. */
  readonly postgresUrl: string;
  /** Point the Switchyard side at a second bare baseline: the ratio should come out near 1.0. */
  readonly selfCheck: boolean;
  /** Directory for V8 CPU profiles of every Switchyard process (written when it stops), or undefined. */
  readonly cpuProfileDir: string | undefined;
  /** Before each phase, wait up to this long for the rest of the machine to go idle (0: do not wait). */
  readonly quietWaitSec: number;
}

/** What a bench gets from the runner; it starts and stops its own servers through it. */
export interface BenchContext {
  readonly options: RunOptions;
  readonly cpus: CpuPlan;
  /** Progress for humans; goes to stderr so stdout stays one JSON object. */
  log(message: string): void;
  /** A bare `node:http` server that parses each body as JSON and answers 200. */
  startBaseline(label: string): Promise<Target>;
  /** Switchyard on a fresh store, with one source whose write key is in the target's headers. */
  startSwitchyard(label: string): Promise<Target>;
  /**
   * The baseline's work on Fastify 5 with its default JSON parser
   * (`fastify-floor-server.ts`), pinned like the other servers: the best a
   * collector on the mandated framework can do before storing anything.
   */
  startFrameworkFloor(label: string): Promise<Target>;
  /**
   * The baseline's work plus each message stored as one SQLite row, group
   * committed, before the 200 (`store-floor-server.ts`), pinned like the
   * other servers: the best any collector that keeps every message as a row
   * of an embedded database can do on the machine.
   */
  startStoreFloor(label: string): Promise<Target>;
  /**
   * The baseline's work plus each body appended to a file, answered only
   * after an fdatasync covering it (group commit; `durable-baseline-server.ts`),
   * pinned like the other servers: the least any collector whose 200 means
   * "stored" must do. ingest.track is judged against it (issue 28).
   */
  startDurableBaseline(label: string): Promise<Target>;
  /** The same context with every process sharing every CPU, for a bench that must not pin (see `ingest.live`). */
  unpinned(): BenchContext;
  /** The same context with Switchyard on `store` (a scratch database for `postgres`), for a bench that compares the stores in one run. */
  onStore(store: StoreKind): BenchContext;
}

interface BenchReportBase {
  readonly description: string;
  /** What the ratio divides, e.g. "requests/s". */
  readonly metric: string;
  readonly ratio: number;
  readonly [extra: string]: unknown;
}

/** A bench judged against its target (docs/targets.md). */
export interface JudgedBenchReport extends BenchReportBase {
  readonly informational?: false;
  /** The target (docs/targets.md) for the ratio. */
  readonly target: number;
  readonly pass: boolean;
}

/**
 * A bench measured for context only: it has no target in docs/targets.md, so it
 * can neither pass nor fail, and the summary lists it apart.
 */
export interface InformationalBenchReport extends BenchReportBase {
  readonly informational: true;
  readonly target?: undefined;
  readonly pass?: undefined;
  /** The judged benches whose ratio this one bounds from above (a framework floor), for the report to show side by side. */
  readonly floorOf?: readonly string[];
}

/**
 * One bench's entry in the output. The shape beyond these fields is the
 * bench's own, so that later benches (delivery, backlog) can report what
 * fits them.
 */
export type BenchReport = JudgedBenchReport | InformationalBenchReport;

export interface BenchDefinition {
  readonly name: string;
  /** The stores it applies to (all when absent); a full run leaves out the others. */
  readonly stores?: readonly StoreKind[];
  run(context: BenchContext): Promise<BenchReport>;
}
