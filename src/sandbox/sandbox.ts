import ivm from 'isolated-vm';
import { isolatePrelude } from './isolate-prelude.js';
import type { SandboxLimits } from './sandbox-limits.js';

/** How the code is written: an ES module with `export`s (transformations) or a script defining global functions (Segment-style functions). */
export type CodeKind = 'module' | 'script';

export interface SandboxCode {
  readonly code: string;
  readonly kind: CodeKind;
  /** Shown in error positions, e.g. `transformation.js`. */
  readonly filename: string;
  /** The functions the host may call; those the code does not define are absent. */
  readonly entryPoints: readonly string[];
  /** Host callbacks and the globals built on them (function destinations' `fetch`); none for transformations. */
  readonly host?: SandboxHost | undefined;
}

/**
 * What a program gets from the host beyond V8's built-ins. The boundary
 * stays strings only:
 * - `setup` is a script whose value is a function; it runs once per isolate,
 *   after the prelude and before the user's code, with `currentCall` (the
 *   prelude's: the id of the call whose code runs now, 0 for none), then
 *   `callbacks`, then `notices` as its arguments (isolated-vm `Callback`s:
 *   inside the isolate they are plain functions whose arguments and result
 *   are copied, never References, so no host object can be reached through
 *   them). It must return `[invoke, settle]`, two functions of its own kept
 *   by the host only: every call goes through `invoke(entryPoint, ...args)`,
 *   and `settle(a, b)` is how the host answers a call's asynchronous work
 *   later (see {@link CallOptions.onStart}).
 */
export interface SandboxHost {
  readonly setup: string;
  /** Synchronous host functions: the isolate waits for them; called with copies of what it passed, they must return a string. */
  readonly callbacks: ReadonlyArray<(...args: unknown[]) => string>;
  /**
   * Fire and forget: the isolate goes on at once and the host function runs
   * later on the host's thread, in the order sent; it answers, if at all,
   * through the call's `settle`. (No thread waits on the other: cheaper than
   * a callback.)
   */
  readonly notices?: ReadonlyArray<(...args: unknown[]) => void> | undefined;
}

/** What one call gave back. `value` is the JSON text of what the function returned (undefined: it returned undefined). */
export type CallResult =
  | { readonly ok: true; readonly value: unknown; readonly logs: string[]; readonly durationMs: number }
  | {
      readonly ok: false;
      readonly error: string;
      readonly logs: string[];
      readonly durationMs: number;
      readonly fault?: 'timeout' | 'memory';
      /**
       * With `fault: 'memory'`: other calls were in flight in the same
       * isolate when it ran out, so which call used the memory is unknown.
       * With `fault: 'timeout'`: this call was stopped with its isolate
       * because another call in it ran on past its time (see
       * {@link Sandbox}, "Faults"); it may not have been late itself.
       */
      readonly shared?: boolean;
      readonly errorType?: string | undefined;
    };

/** A call's own handle on its isolate, given to {@link CallOptions.onStart}. */
export interface StartedCall {
  /** What the host setup's `currentCall()` answers while this call's code runs. */
  readonly id: number;
  /** Calls the setup's `settle(a, b)` in the call's isolate, with this call current; nothing once the isolate is gone. */
  readonly settle: (a: string, b: string) => void;
}

export interface CallOptions {
  /** JSON text: the call gets a last argument `metadata(event)` returning a copy of it (transformations). */
  readonly meta?: string | undefined;
  /** Called once the call has its isolate, before its code runs. */
  readonly onStart?: ((call: StartedCall) => void) | undefined;
}

export interface SandboxOptions {
  /**
   * Calls in flight at once in the isolate (default 1); the rest wait their
   * turn, first come first served. Above 1 only for code that mostly waits
   * on the host (function destinations' `fetch`): calls share one thread.
   */
  readonly concurrency?: number;
}

/** Thrown when code does not compile or defines none of the entry points; line and column are 1-based when known. */
export class CodeError extends Error {
  override readonly name = 'CodeError';
  constructor(
    message: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(message);
  }
}

type Ref = ivm.Reference<unknown>;

interface Loaded {
  readonly isolate: ivm.Isolate;
  readonly context: ivm.Context;
  /** The prelude's dispatch, resume and currentCall (see isolate-prelude.ts). */
  readonly dispatch: Ref;
  readonly resume: Ref;
  readonly functions: ReadonlyMap<string, Ref>;
  /** With a {@link SandboxHost}: the setup's `invoke`, which every call goes through, and its `settle`. */
  readonly invoke?: Ref | undefined;
  readonly settle?: Ref | undefined;
  /** Takes no new calls; disposed once no call is in it (`liveCalls` is empty). */
  retired: boolean;
  /** Calls in it when a call first found it disposed under it (out of memory). */
  callsAtFault?: number;
  /** Its heap in use when last read (see {@link Sandbox.heapBytes}). */
  heapBytes?: number;
  /** Shared with the prelude: `[entries so far, call id of the latest]` (see {@link Sandbox.watchStuck}). */
  readonly board: Float64Array;
  /** Ids of the calls started in it that have not ended (a call ends when it is answered or runs out of time). */
  readonly liveCalls: Set<number>;
  /** Since when (and its `wallTime` then) the board has shown the same entry of a call that is over (see {@link Sandbox.watchStuck}). */
  held: { entries: number; since: number; wallMs: number };
  /** Disposed because its thread was held by an entry of a call that was over (see {@link Sandbox.watchStuck}). */
  stuck?: boolean;
}

/** How long a heap read waits for a busy isolate. */
const HEAP_READ_WAIT_MS = 250;

/** How often live isolates are looked at for a thread held by code whose call is over (see {@link Sandbox.watchStuck}). */
const STUCK_LOOK_MS = 100;
/** The share of that time the entry must have been open for (isolated-vm's `wallTime` grows only while an entry is open). */
const STUCK_OPEN_SHARE = 0.75;
/** How long such code may hold the thread before its isolate is disposed (at most the call time limit). */
const STUCK_GRACE_MS = 500;

/**
 * One program in its own V8 isolate (isolated-vm), loaded once and reused
 * for every call. Up to `concurrency` calls run in it at once (1 by
 * default: one at a time, in the order made).
 *
 * Faults: a call that runs past its time fails (`timeout`) and retires its
 * isolate: later calls go to a fresh one, and the retired isolate is
 * disposed once the other calls in it have ended (each within its own
 * time), which ends whatever still runs there. The time limit is the host's
 * timer alone once the code is loaded: isolated-vm's own per-entry
 * `timeout` is not used for calls, because each timed entry leaves a native
 * timer queued until its deadline and wakes isolated-vm's timer thread then,
 * a fifth of a function call's CPU (docs/performance.md). What it did, stop
 * code stuck in one entry (a loop that never awaits) while the isolate's
 * other calls go on, is done by disposing the isolate: when a call's time
 * is up (or it has ended) and its code still holds the isolate's thread in
 * one entry for {@link STUCK_GRACE_MS} (see {@link Sandbox.watchStuck}),
 * the isolate is disposed at once and the other calls in it fail as
 * `timeout` with `shared`: a loop is stopped half a second after its
 * call's limit, not after the other calls' (and a loop left behind by a
 * call that was answered, half a second after it started). Code of a
 * finished call that runs on inside a live call's entry, through a promise
 * the two share, is stopped by that call's limit, within twice the limit.
 * An isolate that runs out of memory is disposed by isolated-vm at once,
 * failing every call in it (`memory`). Either way only calls of this
 * program fail, and only those already in that isolate.
 *
 * The boundary: only strings (and call ids) cross it, and a board of two
 * numbers the prelude writes and the host reads (which call each entry
 * runs for, see {@link Sandbox.watchStuck}). Arguments go in as
 * JSON text (parsed inside by the prelude), results come out as JSON text
 * (parsed here, size-checked first). No host function, object or Reference
 * is ever handed to the isolate's code; it has only V8's built-ins plus
 * `log` (and what a {@link SandboxHost} builds from its callbacks).
 */
export class Sandbox {
  private loaded: Loaded | undefined;
  private loading: Promise<Loaded> | undefined;
  /** Isolates alive (the current one and retired ones still ending calls). */
  private readonly live = new Set<Loaded>();
  private disposed = false;
  private pending = 0;
  private nextCallId = 1;
  /** The stuck-code look, while this program has live isolates. */
  private watch: NodeJS.Timeout | undefined;
  private readonly concurrency: number;
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    readonly program: SandboxCode,
    private readonly limits: SandboxLimits,
    options: SandboxOptions = {},
  ) {
    this.concurrency = Math.max(1, Math.floor(options.concurrency ?? 1));
  }

  /** The entry points the code defines (loads it). */
  entryPoints(): Promise<string[]> {
    return this.track(async () => [...(await this.load()).functions.keys()]);
  }

  /** Whether the code defines entry point `name`, when its isolate is loaded and takes calls; undefined otherwise (then see {@link entryPoints}). */
  defines(name: string): boolean | undefined {
    const loaded = this.loaded;
    return loaded === undefined || loaded.retired || loaded.isolate.isDisposed ? undefined : loaded.functions.has(name);
  }

  /** Calls `name` with the JSON array `argsJson`, once one of the `concurrency` turns is free. */
  call(name: string, argsJson: string, options: CallOptions = {}): Promise<CallResult> {
    return this.track(async () => {
      await this.turn();
      try {
        return await this.callNow(name, argsJson, options);
      } finally {
        this.endTurn();
      }
    });
  }

  private turn(): Promise<void> {
    if (this.running < this.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private endTurn(): void {
    const next = this.waiting.shift();
    // The turn passes on; `running` stays.
    if (next !== undefined) next();
    else this.running--;
  }

  /** Counts the work in flight, so that a dispose (an LRU eviction) waits for it instead of failing it. */
  private async track<T>(work: () => Promise<T>): Promise<T> {
    this.pending++;
    try {
      return await work();
    } finally {
      this.pending--;
      if (this.disposed && this.pending === 0) this.retireCurrent();
    }
  }

  /**
   * Heap in use of this program's live isolates, in bytes (0 when none is
   * loaded). Read on each isolate's own thread, after what runs there: an
   * isolate busy for longer than `waitMs` counts with what it last answered.
   */
  async heapBytes(waitMs = HEAP_READ_WAIT_MS): Promise<number> {
    const reads = [...this.live].map(async (loaded) => {
      if (loaded.isolate.isDisposed) return 0;
      // Through then: a read of an isolate disposed meanwhile may throw at once.
      const read = Promise.resolve().then(() => loaded.isolate.getHeapStatistics()).then(
        (stats) => (loaded.heapBytes = stats.used_heap_size + stats.externally_allocated_size),
        () => 0,
      );
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(loaded.heapBytes ?? 0), waitMs)));
      return Promise.race([read, late]).finally(() => clearTimeout(timer));
    });
    return (await Promise.all(reads)).reduce((sum, bytes) => sum + bytes, 0);
  }

  /** Disposes the isolate now, or when the calls already made have ended (an evicted sandbox still answers them). */
  dispose(): void {
    this.disposed = true;
    if (this.pending === 0) this.retireCurrent();
  }

  private retireCurrent(): void {
    const loaded = this.loaded;
    this.loaded = undefined;
    this.loading = undefined;
    if (loaded !== undefined) this.retire(loaded);
  }

  /** No new calls go to `loaded`; it is disposed once the calls in it have ended. */
  private retire(loaded: Loaded): void {
    loaded.retired = true;
    if (this.loaded === loaded) this.loaded = undefined;
    if (loaded.liveCalls.size === 0) {
      this.live.delete(loaded);
      disposeQuietly(loaded);
    }
  }

  private async callNow(name: string, argsJson: string, options: CallOptions): Promise<CallResult> {
    const started = performance.now();
    const took = (): number => Math.round((performance.now() - started) * 100) / 100;
    let loaded: Loaded;
    try {
      loaded = await this.load();
    } catch (error) {
      return { ok: false, error: error instanceof Error ? error.message : String(error), logs: [], durationMs: took() };
    }
    const fn = loaded.functions.get(name);
    if (fn === undefined) return { ok: false, error: `the code defines no ${name} function`, logs: [], durationMs: took() };
    const id = this.nextCallId++;
    loaded.liveCalls.add(id);
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    try {
      options.onStart?.({ id, settle: (a, b) => resumeIn(loaded, id, a, b) });
      // Through the host setup's invoke: `[name, ...args]`.
      const target = loaded.invoke ?? fn;
      const callArgs = loaded.invoke === undefined ? argsJson : `[${JSON.stringify(name)}${argsJson.trim() === '[]' ? '' : `,${argsJson.trim().slice(1, -1)}`}]`;
      // The timer bounds the call, its synchronous part and its awaited
      // promises alike (a loop, a promise that never settles, a microtask
      // loop); see "Faults" above for code stuck in one entry.
      const text = await Promise.race([
        loaded.dispatch.apply(undefined, [target.derefInto(), callArgs, options.meta, id], { result: { promise: true, copy: true } }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            timedOut = true;
            reject(new Error('timed out'));
          }, this.limits.timeoutMs);
        }),
      ]);
      return { ...parseResult(text, this.resultChars(), this.limits.logBytes), durationMs: took() };
    } catch (error) {
      if (loaded.stuck === true && !timedOut) {
        return { ok: false, error: `stopped: another call in its isolate ran on past ${this.limits.timeoutMs} ms`, logs: [], durationMs: took(), fault: 'timeout', shared: true };
      }
      // isolated-vm disposes an isolate that runs out of memory; this class
      // disposes one only once no call is in it (or once it is stuck, above),
      // so an isolate disposed under a call that did not time out ran out of
      // memory (during an awaited promise the error then says only "Promise
      // was abandoned").
      const memory = loaded.isolate.isDisposed && !timedOut;
      if (memory) loaded.callsAtFault ??= loaded.liveCalls.size;
      // Only this host's timer says a call timed out: calls run with no
      // isolated-vm timeout, so an error that says so is the code's own.
      const timeout = !memory && timedOut;
      if (memory || timeout) this.retire(loaded);
      // Anything else is what the code threw out of the dispatcher (user code
      // can make its catch throw: a toJSON on Object.prototype, a replaced
      // String.prototype.slice): untrusted text, bounded as parseResult does.
      const message = timeout ? `timed out after ${this.limits.timeoutMs} ms` : memory ? `ran out of memory (${this.limits.memoryMb} MB)` : bounded(error instanceof Error ? error.message : String(error));
      const fault = timeout ? { fault: 'timeout' as const } : memory ? { fault: 'memory' as const, ...((loaded.callsAtFault ?? 1) > 1 && { shared: true }) } : {};
      return { ok: false, error: message, logs: [], durationMs: took(), ...fault };
    } finally {
      clearTimeout(timer);
      loaded.liveCalls.delete(id);
      if (loaded.retired) this.retire(loaded);
    }
  }

  /**
   * Every {@link STUCK_LOOK_MS} while this program has live isolates, looks
   * at each for code that holds its thread although its call is over (its
   * time is up, or it was answered and left a loop behind). Every entry
   * into an isolate notes on the board the prelude shares with the host
   * which call it runs for and how many entries there have been. When the
   * board has shown the same entry, of a call that is over, for
   * {@link STUCK_GRACE_MS} (or the time limit, if shorter) and an entry was
   * open for most of that time (isolated-vm's `wallTime` grows only while
   * one is), that entry holds the thread: the isolate is disposed. A busy
   * isolate starts entries; a long entry of a live call is that call's to
   * finish within its own time; an idle isolate has none open; a stall of
   * this thread only lengthens a look.
   */
  private watchStuck(): void {
    if (this.watch !== undefined) return;
    const graceMs = Math.min(STUCK_GRACE_MS, this.limits.timeoutMs);
    this.watch = setInterval(() => {
      if (this.live.size === 0) {
        clearInterval(this.watch);
        this.watch = undefined;
        return;
      }
      for (const loaded of this.live) {
        const wallMs = wallTimeMs(loaded);
        if (wallMs === undefined) continue;
        const at = performance.now();
        const entries = loaded.board[0]!;
        if (entries !== loaded.held.entries || loaded.liveCalls.has(loaded.board[1]!)) {
          loaded.held = { entries, since: at, wallMs };
          continue;
        }
        const heldMs = at - loaded.held.since;
        if (heldMs >= graceMs && wallMs - loaded.held.wallMs >= heldMs * STUCK_OPEN_SHARE) {
          loaded.stuck = true;
          this.live.delete(loaded);
          disposeQuietly(loaded);
        }
      }
    }, STUCK_LOOK_MS);
    this.watch.unref();
  }

  private resultChars(): number {
    return this.limits.outputBytes * this.limits.maxOutputs + this.limits.logBytes * 2 + 1024;
  }

  private load(): Promise<Loaded> {
    // A disposed sandbox may still load for work already handed to it (see track), which retires it after.
    if (this.loaded !== undefined && !this.loaded.retired && !this.loaded.isolate.isDisposed) return Promise.resolve(this.loaded);
    if (this.loaded !== undefined) this.retire(this.loaded);
    this.loading ??= loadProgram(this.program, this.limits, this.resultChars()).then(
      (loaded) => {
        this.loaded = loaded;
        this.live.add(loaded);
        this.watchStuck();
        this.loading = undefined;
        return loaded;
      },
      (error: unknown) => {
        this.loading = undefined;
        throw error;
      },
    );
    return this.loading;
  }
}

/**
 * Answers call `id`'s asynchronous work: the setup's `settle(a, b)`, entered
 * through the prelude's `resume`, one entry per answer (an entry's
 * microtasks all run before the next entry, which is what keeps each
 * continuation in its own call). Strings and a number only; nothing comes
 * back (isolated-vm's `applyIgnored`: no promise, no return to this
 * thread). An entry into a busy isolate queues behind what runs there; the
 * call's own timer bounds it (see {@link Sandbox}, "Faults").
 */
function resumeIn(loaded: Loaded, id: number, a: string, b: string): void {
  if (loaded.settle === undefined || loaded.isolate.isDisposed) return;
  try {
    loaded.resume.applyIgnored(undefined, [id, loaded.settle.derefInto(), a, b]);
  } catch {
    // Disposed meanwhile: the call fails by its own means (memory, or its timer).
  }
}

/** The isolate's time with an entry open, in ms; undefined once disposed. */
function wallTimeMs(loaded: Loaded): number | undefined {
  try {
    return loaded.isolate.isDisposed ? undefined : Number(loaded.isolate.wallTime) / 1e6;
  } catch {
    return undefined; // disposed meanwhile
  }
}

/** Disposes an isolate that isolated-vm may have disposed meanwhile (out of memory, on its own thread). */
function disposeQuietly(loaded: Loaded): void {
  try {
    if (!loaded.isolate.isDisposed) loaded.isolate.dispose();
  } catch {
    // already disposed
  }
}

/** Parses what the dispatcher returned: untrusted text, bounded before it is parsed. */
type ParsedResult = { readonly ok: true; readonly value: unknown; readonly logs: string[] } | { readonly ok: false; readonly error: string; readonly logs: string[]; readonly errorType?: string | undefined };

function parseResult(text: unknown, maxChars: number, logChars: number): ParsedResult {
  if (typeof text !== 'string' || text.length > maxChars) return { ok: false, error: 'the result is too large', logs: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, error: 'the result could not be read', logs: [] };
  }
  if (typeof parsed !== 'object' || parsed === null) return { ok: false, error: 'the result could not be read', logs: [] };
  const record = parsed as { value?: unknown; error?: unknown; errorType?: unknown; logs?: unknown };
  // The prelude bounds both, but user code can change what it serializes
  // (a toJSON on a prototype), so they are bounded again here.
  const logs: string[] = [];
  let budget = logChars;
  for (const line of Array.isArray(record.logs) ? (record.logs as unknown[]) : []) {
    if (typeof line !== 'string') continue;
    if (line.length > budget) {
      logs.push(line.slice(0, budget) + ' [log limit reached]');
      break;
    }
    logs.push(line);
    budget -= line.length;
  }
  if (typeof record.error === 'string') {
    const errorType = typeof record.errorType === 'string' ? record.errorType.slice(0, 100) : undefined;
    return { ok: false, error: bounded(record.error), logs, ...(errorType !== undefined && { errorType }) };
  }
  return { ok: true, value: record.value, logs };
}

/** An error's text from the isolate, at most 1,000 characters. */
function bounded(text: string): string {
  return text.length > 1000 ? text.slice(0, 1000) + '…' : text;
}

/** `[transformation.js:3:13]` at the end of isolated-vm's messages. */
const POSITION = /\s*\[[^\]]*?:(\d+):(\d+)\]$/;
/** How much of the end of a message {@link POSITION} is looked for in: a filename, a line and a column. */
const POSITION_TAIL_CHARS = 200;

export function codeErrorOf(error: unknown, prefix: string): CodeError {
  // Code that throws as it loads chooses the message, as long as it likes:
  // POSITION is looked for in its tail only (the pattern backtracks, so on
  // the whole of a long message it could hold this thread for minutes), and
  // only its head is kept.
  const message = error instanceof Error ? error.message : String(error);
  const tailFrom = Math.max(0, message.length - POSITION_TAIL_CHARS);
  const at = POSITION.exec(message.slice(tailFrom));
  if (at === null) return new CodeError(`${prefix}${bounded(message)}`);
  const line = Number(at[1]);
  const column = Number(at[2]);
  return new CodeError(`${prefix}${bounded(message.slice(0, tailFrom + at.index))} (line ${line}, column ${column})`, line, column);
}

async function loadProgram(program: SandboxCode, limits: SandboxLimits, resultChars: number): Promise<Loaded> {
  if (Buffer.byteLength(program.code) > limits.codeBytes) throw new CodeError(`the code is larger than ${limits.codeBytes / 1024} KB`);
  const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
  try {
    const context = await isolate.createContext();
    const prelude = await isolate.compileScript(isolatePrelude(limits.logBytes, resultChars, program.filename), { filename: 'switchyard-prelude.js' });
    const entries = (await prelude.run(context, { reference: true, timeout: limits.timeoutMs })) as Ref;
    const [dispatch, resume, currentCall, setBoard] = await Promise.all([0, 1, 2, 3].map((i) => (entries as ivm.Reference<Ref[]>).get(i, { reference: true }) as Promise<Ref>));
    // Shared, not copied: the isolate's writes show here as they happen.
    const shared = new SharedArrayBuffer(2 * Float64Array.BYTES_PER_ELEMENT);
    await setBoard!.apply(undefined, [new ivm.ExternalCopy(shared).copyInto({ release: true })], { timeout: limits.timeoutMs });
    const host = program.host === undefined ? undefined : await installHost(isolate, context, program.host, currentCall!, limits);
    const functions = new Map<string, Ref>();
    if (program.kind === 'module') {
      let module: ivm.Module;
      try {
        module = await isolate.compileModule(program.code, { filename: program.filename });
        await module.instantiate(context, (specifier) => {
          throw new Error(`imports are not available (import of ${JSON.stringify(specifier.slice(0, 100))})`);
        });
      } catch (error) {
        throw codeErrorOf(error, '');
      }
      await withTimeout(module.evaluate({ timeout: limits.timeoutMs }), limits.timeoutMs, isolate, 'the code');
      for (const name of program.entryPoints) {
        const ref = await module.namespace.get(name, { reference: true });
        if (ref.typeof === 'function') functions.set(name, ref);
      }
    } else {
      let script: ivm.Script;
      try {
        script = await isolate.compileScript(program.code, { filename: program.filename });
      } catch (error) {
        throw withScriptHint(codeErrorOf(error, ''));
      }
      await withTimeout(script.run(context, { timeout: limits.timeoutMs }), limits.timeoutMs, isolate, 'the code');
      for (const name of program.entryPoints) {
        const ref = await context.global.get(name, { reference: true });
        if (ref.typeof === 'function') functions.set(name, ref);
      }
    }
    return { isolate, context, dispatch: dispatch!, resume: resume!, functions, invoke: host?.invoke, settle: host?.settle, board: new Float64Array(shared), liveCalls: new Set(), held: { entries: 0, since: performance.now(), wallMs: 0 }, retired: false };
  } catch (error) {
    if (!isolate.isDisposed) isolate.dispose();
    if (error instanceof CodeError) throw error;
    throw codeErrorOf(error, 'the code failed as it loaded: ');
  }
}

/** Runs the host's setup script with `currentCall`, its callbacks and notices; resolves its `invoke` and `settle` (see {@link SandboxHost}). */
async function installHost(isolate: ivm.Isolate, context: ivm.Context, host: SandboxHost, currentCall: Ref, limits: SandboxLimits): Promise<{ invoke: Ref; settle: Ref }> {
  const script = await isolate.compileScript(host.setup, { filename: 'switchyard-host.js' });
  const setup = (await script.run(context, { reference: true, timeout: limits.timeoutMs })) as Ref;
  const callbacks = host.callbacks.map((callback) => new ivm.Callback(callback, { sync: true }));
  const notices = (host.notices ?? []).map((notice) => new ivm.Callback(notice, { ignored: true }));
  const pair = (await setup.apply(undefined, [currentCall.derefInto(), ...callbacks, ...notices], { result: { reference: true }, timeout: limits.timeoutMs })) as ivm.Reference<unknown[]>;
  const invoke: Ref = await pair.get(0, { reference: true });
  const settle: Ref = await pair.get(1, { reference: true });
  if (invoke.typeof !== 'function' || settle.typeof !== 'function') throw new Error('the host setup did not return [invoke, settle]');
  return { invoke, settle };
}

async function withTimeout<T>(work: Promise<T>, ms: number, isolate: ivm.Isolate, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          if (!isolate.isDisposed) isolate.dispose();
          reject(new Error(`${what} did not finish loading within ${ms} ms`));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Compiles and loads code in a throwaway isolate, to refuse it at save:
 * resolves the entry points it defines, or rejects with a {@link CodeError}
 * (with line and column when the code does not compile).
 */
export async function checkCode(program: SandboxCode, limits: SandboxLimits): Promise<string[]> {
  const sandbox = new Sandbox(program, limits);
  try {
    const found = await sandbox.entryPoints();
    if (found.length === 0) throw new CodeError(noEntryPoint(program));
    return found;
  } finally {
    sandbox.dispose();
  }
}

/**
 * A script (a function destination, written as Segment's are) that uses
 * `export` or `import`, as a module (a transformation) does: V8 says only
 * "Unexpected token 'export'", so say what to write instead.
 */
function withScriptHint(error: CodeError): CodeError {
  const keyword = /^(?:Unexpected token '(export)'|Cannot use (import) statement outside a module)/.exec(error.message);
  if (keyword === null) return error;
  const hint =
    keyword[1] === 'export'
      ? 'this code is a script, not a module: remove `export` and write `async function onTrack(event, settings) {…}`'
      : 'this code is a script, not a module: imports are not available';
  return new CodeError(`${error.message}: ${hint}`, error.line, error.column);
}

/**
 * Why no entry point was found, for the person who wrote the code. A module
 * that exports nothing but declares an entry point (a script's habit, as
 * Segment's functions are written) is told to export it: "defines none"
 * would read as wrong.
 */
function noEntryPoint(program: SandboxCode): string {
  // Only for code that exports nothing: one that exports something else (or the name as no function) is told what it lacks.
  if (program.kind === 'module' && !/\bexport\b/.test(program.code)) {
    const declared = program.entryPoints.find((name) => new RegExp(`(?:\\bfunction\\s*(?:\\*\\s*)?|\\b(?:const|let|var)\\s+)${name}\\b`).test(program.code));
    if (declared !== undefined) return `the code declares ${declared} but does not export it: write \`export function ${declared}(…)\``;
  }
  // A script's `const onTrack = …` (or `let`) is not a global, so the host cannot call it.
  if (program.kind === 'script') {
    const lexical = program.entryPoints.find((name) => new RegExp(`\\b(?:const|let|class)\\s+${name}\\b`).test(program.code));
    if (lexical !== undefined) return `the code declares ${lexical} with const, let or class, which the host cannot call: write \`async function ${lexical}(event, settings) {…}\``;
  }
  return `the code defines none of ${program.entryPoints.join(', ')}`;
}
