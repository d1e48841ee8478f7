import { redact, secretValues } from '../domain/function-settings.js';
import { type Sandbox, type SandboxCode, type SandboxHost, checkCode } from '../sandbox/sandbox.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';
import { SandboxPool } from '../sandbox/sandbox-pool.js';
import type { FetchRecord } from '../store/store.js';
import { FUNCTION_GLOBALS } from './function-globals.js';
import { FetchSession, type FunctionFetcher, parseUrlJson } from './function-fetch.js';

/** Segment's handler for each message type. */
export const HANDLERS: Readonly<Record<string, string>> = Object.freeze({
  track: 'onTrack',
  identify: 'onIdentify',
  page: 'onPage',
  screen: 'onScreen',
  group: 'onGroup',
  alias: 'onAlias',
  delete: 'onDelete',
});

const ENTRY_POINTS = Object.values(HANDLERS);

/** One version of a function's code, as the runner needs it. */
export interface FunctionCode {
  readonly id: string;
  readonly version: number;
  readonly code: string;
}

/**
 * How one call ended (docs/functions.md, "Outcomes"): `delivered`
 * when the handler returned; `retry` for RetryError, a network error or
 * timeout of `fetch` thrown out of the handler, or the call running past
 * its time; `failed` for everything else (EventNotSupported, a missing
 * handler, InvalidEventPayload, ValidationError, any other throw).
 */
export interface FunctionCallResult {
  readonly outcome: 'delivered' | 'retry' | 'failed';
  readonly error?: string | undefined;
  readonly errorType?: string | undefined;
  readonly fetches: readonly FetchRecord[];
  readonly logs: readonly string[];
  readonly durationMs: number;
}

/**
 * The host side of one program's bridge (all its isolates): the fetch
 * session of each call in flight, by call id. A `startFetch` is taken for
 * the call the isolate names as current (see isolate-prelude.ts) and
 * dropped for one that has ended or never was (nobody waits for it).
 */
class FunctionBridge {
  readonly sessions = new Map<number, FetchSession>();

  readonly host: SandboxHost = {
    setup: FUNCTION_GLOBALS,
    callbacks: [(input: unknown, base: unknown, part: unknown, value: unknown) => parseUrlJson(input, base, part, value)],
    notices: [
      (callId: unknown, fetchId: unknown, requestJson: unknown, body: unknown) => {
        if (typeof callId !== 'number' || !Number.isSafeInteger(fetchId) || (fetchId as number) <= 0) return;
        // A notice's exceptions are dropped by isolated-vm, which would leave the fetch unanswered: start answers every failure itself.
        this.sessions.get(callId)?.start(fetchId as number, requestJson, body);
      },
    ],
  };
}

/** Segment's code shape: a script defining global `onTrack`, `onIdentify`, … functions. */
export function functionProgram(code: string, host: SandboxHost): SandboxCode {
  return { code, kind: 'script', filename: 'function.js', entryPoints: ENTRY_POINTS, host };
}

/** Refuses code that does not compile, throws as it loads or defines no handler; rejects with a CodeError. */
export async function checkFunctionCode(code: string, limits: SandboxLimits): Promise<string[]> {
  return checkCode(functionProgram(code, new FunctionBridge().host), limits);
}

/**
 * Runs function destinations' handlers: one isolate per function version
 * (pooled, as transformations), one message per call, up to `concurrency`
 * calls in flight in it at once (each with its own fetch session, logs and
 * time limit), the calls' `fetch` bridged to {@link FunctionFetcher}.
 */
export class FunctionRunner {
  readonly pool: SandboxPool;
  private readonly bridges = new WeakMap<Sandbox, FunctionBridge>();
  /**
   * A settings object's JSON and secrets, worked out once per object: the
   * delivery worker passes the same object for every call until the
   * destination changes (settings are never changed in place).
   */
  private readonly settingsParts = new WeakMap<object, { readonly json: string; readonly secrets: readonly string[] }>();

  constructor(
    readonly limits: SandboxLimits,
    private readonly fetcher: FunctionFetcher,
    maxIsolates?: number,
    /** Calls in flight at once per function version (1: one at a time). */
    concurrency = 1,
  ) {
    this.pool = new SandboxPool(limits, maxIsolates, { concurrency });
  }

  /** Whether the isolate of this version is loaded (its code need not be read again). */
  has(id: string, version: number): boolean {
    return this.pool.has(`${id}@${version}`);
  }

  /**
   * Calls the handler of the message's type with the message and the
   * settings; never rejects. `known.type`: the message's `type` when the
   * caller has parsed it already (the text is then not parsed again here).
   */
  async run(fn: FunctionCode, eventJson: string, settings: Readonly<Record<string, unknown>>, known?: { readonly type: unknown }): Promise<FunctionCallResult> {
    let created: FunctionBridge | undefined;
    const sandbox = this.pool.get(`${fn.id}@${fn.version}`, () => {
      created = new FunctionBridge();
      return functionProgram(fn.code, created.host);
    });
    if (created !== undefined) this.bridges.set(sandbox, created);
    const bridge = this.bridges.get(sandbox)!;
    let parts = this.settingsParts.get(settings);
    if (parts === undefined) this.settingsParts.set(settings, (parts = { json: JSON.stringify(settings), secrets: secretValues(settings) }));
    const result = await this.callNow(sandbox, bridge, eventJson, parts.json, known);
    const secrets = parts.secrets;
    if (secrets.length === 0) return result;
    return {
      ...result,
      error: result.error === undefined ? undefined : redact(result.error, secrets),
      // The thrown error's name is code's to set, and shown beside its message.
      errorType: result.errorType === undefined ? undefined : redact(result.errorType, secrets),
      fetches: result.fetches.map((f) => ({ ...f, url: redact(f.url, secrets), ...(f.error !== undefined && { error: redact(f.error, secrets) }) })),
      logs: result.logs.map((line) => redact(line, secrets)),
    };
  }

  private async callNow(
    sandbox: Sandbox,
    bridge: FunctionBridge,
    eventJson: string,
    settingsJson: string,
    known: { readonly type: unknown } | undefined,
  ): Promise<FunctionCallResult> {
    const started = performance.now();
    const took = (): number => Math.round((performance.now() - started) * 100) / 100;
    let type: unknown = known?.type;
    if (known === undefined) {
      try {
        type = (JSON.parse(eventJson) as { type?: unknown } | null)?.type;
      } catch {
        return { outcome: 'failed', errorType: 'InvalidEventPayload', error: 'the stored message is not JSON', fetches: [], logs: [], durationMs: took() };
      }
    }
    const handler = typeof type === 'string' && Object.hasOwn(HANDLERS, type) ? HANDLERS[type]! : undefined;
    let defined = handler === undefined ? undefined : sandbox.defines(handler);
    if (defined === undefined) {
      // Not loaded yet: loading comes first, so code that does not load says so whatever the message.
      try {
        const names = await sandbox.entryPoints();
        defined = handler !== undefined && names.includes(handler);
      } catch (error) {
        return { outcome: 'failed', error: error instanceof Error ? error.message : String(error), fetches: [], logs: [], durationMs: took() };
      }
    }
    if (handler === undefined || !defined) {
      const what = typeof type === 'string' ? type.slice(0, 40) : 'a message without a type';
      return { outcome: 'failed', errorType: 'EventNotSupported', error: `${what} is not supported${handler === undefined ? '' : ` (the code defines no ${handler})`}`, fetches: [], logs: [], durationMs: took() };
    }
    let session: FetchSession | undefined;
    let callId: number | undefined;
    let result;
    try {
      result = await sandbox.call(handler, `[${eventJson},${settingsJson}]`, {
        onStart: (call) => {
          callId = call.id;
          session = new FetchSession(this.fetcher, call.settle);
          bridge.sessions.set(call.id, session);
        },
      });
    } finally {
      if (callId !== undefined) bridge.sessions.delete(callId);
      session?.close();
    }
    const fetches = session === undefined ? [] : session.records.map((r) => ({ ...r }));
    if (result.ok) return { outcome: 'delivered', fetches, logs: result.logs, durationMs: result.durationMs };
    const base = { error: result.error, errorType: result.errorType, fetches, logs: result.logs, durationMs: result.durationMs };
    if (result.fault === 'timeout') return { ...base, outcome: 'retry', errorType: 'Timeout' };
    // Other calls shared the isolate that ran out: this one may not be the cause.
    if (result.fault === 'memory' && result.shared === true) return { ...base, outcome: 'retry' };
    if (result.errorType === 'RetryError') return { ...base, outcome: 'retry' };
    // A fetch's network error or timeout, thrown on out of the handler.
    if (result.errorType === 'TypeError' && session?.retriableErrors.has(result.error) === true) return { ...base, outcome: 'retry' };
    return { ...base, outcome: 'failed' };
  }

  dispose(): void {
    this.pool.dispose();
  }
}
