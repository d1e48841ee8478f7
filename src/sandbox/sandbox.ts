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
 *   after the prelude and before the user's code, with `callbacks` as its
 *   arguments (isolated-vm `Callback`s: inside the isolate they are plain
 *   functions whose arguments and result are copied, never References, so no
 *   host object can be reached through them). It must return
 *   `[invoke, settle]`, two functions of its own kept by the host only:
 *   every call goes through `invoke(entryPoint, ...args)`, and
 *   `settle(...strings)` is how the host answers asynchronous work later.
 * - `attach` receives, for each isolate loaded, the function that calls
 *   `settle` in it (it does nothing once that isolate is gone).
 */
export interface SandboxHost {
  readonly setup: string;
  /** Synchronous host functions: called with copies of what the isolate passed, they must return a string. */
  readonly callbacks: ReadonlyArray<(...args: unknown[]) => string>;
  readonly attach: (settle: (...args: string[]) => void) => void;
}

/** What one call gave back. `value` is the JSON text of what the function returned (undefined: it returned undefined). */
export type CallResult =
  | { readonly ok: true; readonly value: unknown; readonly logs: string[]; readonly durationMs: number }
  | { readonly ok: false; readonly error: string; readonly logs: string[]; readonly durationMs: number; readonly fault?: 'timeout' | 'memory'; readonly errorType?: string | undefined };

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

interface Loaded {
  readonly isolate: ivm.Isolate;
  readonly context: ivm.Context;
  readonly dispatcher: ivm.Reference<(...args: unknown[]) => Promise<string>>;
  readonly functions: ReadonlyMap<string, ivm.Reference<unknown>>;
  /** With a {@link SandboxHost}: the setup's `invoke`, which every call goes through. */
  readonly invoke?: ivm.Reference<unknown> | undefined;
}

/**
 * One program in its own V8 isolate (isolated-vm), loaded once and reused
 * for every call; recreated after a call that timed out or ran out of
 * memory (which disposes it). Calls run one at a time, in the order made,
 * so a fault fails only the call in flight; the ones queued behind it run
 * in the fresh isolate.
 *
 * The boundary: only strings cross it. Arguments go in as JSON text
 * (parsed inside by the prelude), results come out as JSON text (parsed
 * here, size-checked first). No host function, object or Reference is
 * ever handed to the isolate's code; it has only V8's built-ins plus `log`.
 */
export class Sandbox {
  private loaded: Loaded | undefined;
  private loading: Promise<Loaded> | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;
  private pending = 0;

  constructor(
    readonly program: SandboxCode,
    private readonly limits: SandboxLimits,
  ) {}

  /** The entry points the code defines (loads it). */
  entryPoints(): Promise<string[]> {
    return this.track(async () => [...(await this.load()).functions.keys()]);
  }

  /** Calls `name` with the JSON array `argsJson` (plus `metadata` when `metaJson` is given), after the calls before it. */
  call(name: string, argsJson: string, metaJson?: string): Promise<CallResult> {
    const run = this.queue.then(() => this.callNow(name, argsJson, metaJson));
    this.queue = run.catch(() => undefined);
    return this.track(() => run);
  }

  /** Counts the work in flight, so that a dispose (an LRU eviction) waits for it instead of failing it. */
  private async track<T>(work: () => Promise<T>): Promise<T> {
    this.pending++;
    try {
      return await work();
    } finally {
      this.pending--;
      if (this.disposed && this.pending === 0) this.drop();
    }
  }

  /** The isolate's heap in use, in bytes (0 when not loaded). */
  heapBytes(): number {
    const isolate = this.loaded?.isolate;
    if (isolate === undefined || isolate.isDisposed) return 0;
    const stats = isolate.getHeapStatisticsSync();
    return stats.used_heap_size + stats.externally_allocated_size;
  }

  /** Disposes the isolate now, or when the calls already made have ended (an evicted sandbox still answers them). */
  dispose(): void {
    this.disposed = true;
    if (this.pending === 0) this.drop();
  }

  private drop(): void {
    const isolate = this.loaded?.isolate;
    this.loaded = undefined;
    this.loading = undefined;
    if (isolate !== undefined && !isolate.isDisposed) isolate.dispose();
  }

  private async callNow(name: string, argsJson: string, metaJson: string | undefined): Promise<CallResult> {
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
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    try {
      // Through the host setup's invoke: `[name, ...args]`.
      const target = loaded.invoke ?? fn;
      const callArgs = loaded.invoke === undefined ? argsJson : `[${JSON.stringify(name)}${argsJson.trim() === '[]' ? '' : `,${argsJson.trim().slice(1, -1)}`}]`;
      const args = metaJson === undefined ? [target.derefInto(), callArgs] : [target.derefInto(), callArgs, metaJson];
      // `timeout` bounds the synchronous part inside V8; the timer bounds
      // awaited promises too (a promise that never settles, a microtask loop)
      // by disposing the isolate, which ends whatever runs in it.
      const text = await Promise.race([
        loaded.dispatcher.apply(undefined, args, { result: { promise: true, copy: true }, timeout: this.limits.timeoutMs }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            timedOut = true;
            this.drop();
            reject(new Error('timed out'));
          }, this.limits.timeoutMs);
        }),
      ]);
      const parsed = parseResult(text, this.resultChars(), this.limits.logBytes);
      return parsed.ok ? { ...parsed, durationMs: took() } : { ...parsed, durationMs: took() };
    } catch (error) {
      // isolated-vm disposes an isolate that runs out of memory; nothing else
      // disposes one under a call but the timer, so a disposed isolate that
      // did not time out ran out of memory (during an awaited promise the
      // error then says only "Promise was abandoned").
      const memory = loaded.isolate.isDisposed && !timedOut;
      const timeout = timedOut || /timed out/i.test(String(error));
      if (memory || timeout || loaded.isolate.isDisposed) this.drop();
      const message = timeout ? `timed out after ${this.limits.timeoutMs} ms` : memory ? `ran out of memory (${this.limits.memoryMb} MB)` : error instanceof Error ? error.message : String(error);
      return { ok: false, error: message, logs: [], durationMs: took(), ...(timeout ? { fault: 'timeout' as const } : memory ? { fault: 'memory' as const } : {}) };
    } finally {
      clearTimeout(timer);
    }
  }

  private resultChars(): number {
    return this.limits.outputBytes * this.limits.maxOutputs + this.limits.logBytes * 2 + 1024;
  }

  private load(): Promise<Loaded> {
    // A disposed sandbox may still load for work already handed to it (see track), which drops it after.
    if (this.loaded !== undefined && !this.loaded.isolate.isDisposed) return Promise.resolve(this.loaded);
    this.loaded = undefined;
    this.loading ??= loadProgram(this.program, this.limits, this.resultChars()).then(
      (loaded) => {
        this.loaded = loaded;
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
    return { ok: false, error: record.error.length > 1000 ? record.error.slice(0, 1000) + '…' : record.error, logs, ...(errorType !== undefined && { errorType }) };
  }
  return { ok: true, value: record.value, logs };
}

/** `[transformation.js:3:13]` at the end of isolated-vm's messages. */
const POSITION = /\s*\[[^\]]*?:(\d+):(\d+)\]$/;

export function codeErrorOf(error: unknown, prefix: string): CodeError {
  const message = error instanceof Error ? error.message : String(error);
  const at = POSITION.exec(message);
  if (at === null) return new CodeError(`${prefix}${message}`);
  const line = Number(at[1]);
  const column = Number(at[2]);
  return new CodeError(`${prefix}${message.slice(0, at.index)} (line ${line}, column ${column})`, line, column);
}

async function loadProgram(program: SandboxCode, limits: SandboxLimits, resultChars: number): Promise<Loaded> {
  if (Buffer.byteLength(program.code) > limits.codeBytes) throw new CodeError(`the code is larger than ${limits.codeBytes / 1024} KB`);
  const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
  try {
    const context = await isolate.createContext();
    const prelude = await isolate.compileScript(isolatePrelude(limits.logBytes, resultChars), { filename: 'switchyard-prelude.js' });
    const dispatcher = (await prelude.run(context, { reference: true, timeout: limits.timeoutMs })) as ivm.Reference<(...args: unknown[]) => Promise<string>>;
    const invoke = program.host === undefined ? undefined : await installHost(isolate, context, program.host, limits);
    const functions = new Map<string, ivm.Reference<unknown>>();
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
        throw codeErrorOf(error, '');
      }
      await withTimeout(script.run(context, { timeout: limits.timeoutMs }), limits.timeoutMs, isolate, 'the code');
      for (const name of program.entryPoints) {
        const ref = await context.global.get(name, { reference: true });
        if (ref.typeof === 'function') functions.set(name, ref);
      }
    }
    return { isolate, context, dispatcher, functions, invoke };
  } catch (error) {
    if (!isolate.isDisposed) isolate.dispose();
    if (error instanceof CodeError) throw error;
    throw codeErrorOf(error, 'the code failed as it loaded: ');
  }
}

/** Runs the host's setup script with its callbacks; resolves its `invoke` and attaches its `settle` (see {@link SandboxHost}). */
async function installHost(isolate: ivm.Isolate, context: ivm.Context, host: SandboxHost, limits: SandboxLimits): Promise<ivm.Reference<unknown>> {
  const script = await isolate.compileScript(host.setup, { filename: 'switchyard-host.js' });
  const setup = (await script.run(context, { reference: true, timeout: limits.timeoutMs })) as ivm.Reference<unknown>;
  const callbacks = host.callbacks.map((callback) => new ivm.Callback(callback, { sync: true }));
  const pair = (await setup.apply(undefined, callbacks, { result: { reference: true }, timeout: limits.timeoutMs })) as ivm.Reference<unknown[]>;
  const invoke: ivm.Reference<unknown> = await pair.get(0, { reference: true });
  const settle: ivm.Reference<unknown> = await pair.get(1, { reference: true });
  if (invoke.typeof !== 'function' || settle.typeof !== 'function') throw new Error('the host setup did not return [invoke, settle]');
  host.attach((...args: string[]) => {
    if (isolate.isDisposed) return;
    // Strings only, copied in; its result is ignored. A settle into a busy
    // isolate queues behind what runs there; the call's own timer bounds it.
    settle.apply(undefined, args, { arguments: { copy: true }, timeout: limits.timeoutMs }).catch(() => undefined);
  });
  return invoke;
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
    if (found.length === 0) throw new CodeError(`the code defines none of ${program.entryPoints.join(', ')}`);
    return found;
  } finally {
    sandbox.dispose();
  }
}
