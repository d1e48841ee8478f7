import { MAX_FUNCTIONS_PER_SOURCE, functionNameProblem, maskSettings, mergeSettings, settingsProblem } from '../domain/function-settings.js';
import { type JsonObject, isJsonObject } from '../domain/message.js';
import { asIngested } from '../domain/test-event.js';
import { MAX_REQUESTS_PER_SECOND } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import { DEFAULT_FETCH_BOUNDS, FunctionFetcher } from '../functions/function-fetch.js';
import { type FunctionCallResult, FunctionRunner, checkFunctionCode } from '../functions/function-runner.js';
import { CodeError } from '../sandbox/sandbox.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { FunctionDestinationRecord, FunctionWriteRefusal, Store } from '../store/store.js';
import { randomToken } from '../util/crypto.js';
import { newMessageId } from '../util/ids.js';
import { optionalBoolean, rejectUnknownFields, requireObject } from './validate.js';

/** A function destination as the admin API and the CLI show it (secret-looking settings masked). */
export interface FunctionView {
  readonly id: string;
  readonly sourceId: string;
  readonly name: string;
  readonly version: number;
  readonly enabled: boolean;
  readonly settings: JsonObject;
  readonly maxRequestsPerSecond?: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** On a single read: the current version's code. */
  readonly code?: string;
}

export interface FunctionTestResult {
  readonly input: unknown;
  /** What ingest would have added to the input (see domain/test-event.ts); the handler ran on the input with these. */
  readonly filled: JsonObject;
  readonly ingestRejects?: string;
  readonly outcome: FunctionCallResult['outcome'];
  readonly error?: string;
  readonly errorType?: string;
  readonly fetches: FunctionCallResult['fetches'];
  readonly logs: readonly string[];
  readonly durationMs: number;
}

export interface FunctionAdminOptions {
  readonly limits: SandboxLimits;
  /** The receivers' rules, which a test's `fetch` follows too. */
  readonly allowPrivateReceivers: boolean;
  readonly userAgent: string;
  readonly deliveryTimeoutMs: number;
  /** Present in a serving process, so its own changes route at once. */
  readonly directory?: SourceDirectory | undefined;
}

/** Most sample events one test runs. */
export const MAX_FUNCTION_TEST_EVENTS = 20;

export const newFunctionId = (): string => `fn_${randomToken(20)}`;

const view = (record: FunctionDestinationRecord, code?: string): FunctionView => ({
  id: record.id,
  sourceId: record.sourceId,
  name: record.name,
  version: record.version,
  enabled: record.enabled,
  settings: maskSettings(record.settings),
  ...(record.maxRequestsPerSecond !== undefined && { maxRequestsPerSecond: record.maxRequestsPerSecond }),
  createdAt: new Date(record.createdAt).toISOString(),
  updatedAt: new Date(record.updatedAt).toISOString(),
  ...(code !== undefined && { code }),
});

/**
 * Function destinations over the admin API and the CLI: every save of code
 * loads it in a throwaway isolate first (`invalid_function` with line and
 * column) and is a new version; settings are masked on read and kept on
 * update (see domain/function-settings.ts).
 */
export class FunctionAdmin {
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    private readonly options: FunctionAdminOptions,
  ) {}

  async create(sourceId: string, input: unknown): Promise<FunctionView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'code', 'settings', 'enabled', 'maxRequestsPerSecond']);
    const name = checkedName(body['name']);
    const settings = checkedSettings(body['settings'] ?? {});
    const enabled = optionalBoolean(body['enabled'], 'enabled') ?? true;
    const maxRequestsPerSecond = checkedRate(body['maxRequestsPerSecond']) ?? undefined;
    await this.requireSource(sourceId);
    const code = await this.checkedCode(body['code']);
    const saved = await this.store.insertFunctionDestination({ id: newFunctionId(), sourceId, name, enabled, settings, maxRequestsPerSecond, code, at: this.now() }, MAX_FUNCTIONS_PER_SOURCE);
    const record = refused(saved, sourceId, name);
    await this.options.directory?.reload();
    return view(record);
  }

  async list(sourceId: string): Promise<{ functions: FunctionView[] }> {
    await this.requireSource(sourceId);
    return { functions: (await this.store.listFunctionDestinations(sourceId)).map((r) => view(r)) };
  }

  async get(sourceId: string, id: string): Promise<FunctionView> {
    const record = await this.requireFunction(sourceId, id);
    const code = await this.store.getFunctionCode(id, record.version);
    return view(record, code?.code);
  }

  /** `{code?, name?, enabled?, settings?, maxRequestsPerSecond?}`: new code is a new version. */
  async update(sourceId: string, id: string, input: unknown): Promise<FunctionView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'code', 'settings', 'enabled', 'maxRequestsPerSecond']);
    const name = body['name'] === undefined ? undefined : checkedName(body['name']);
    const enabled = optionalBoolean(body['enabled'], 'enabled');
    const sentSettings = body['settings'] === undefined ? undefined : checkedSettings(body['settings']);
    const maxRequestsPerSecond = checkedRate(body['maxRequestsPerSecond']);
    const current = await this.requireFunction(sourceId, id);
    const code = body['code'] === undefined ? undefined : await this.checkedCode(body['code']);
    const settings = sentSettings === undefined ? undefined : checkedSettings(mergeSettings(current.settings, sentSettings));
    const saved = await this.store.updateFunctionDestination(id, { name, enabled, settings, maxRequestsPerSecond, code }, this.now());
    if (saved === undefined) throw notFound(id);
    const record = refused(saved, sourceId, name ?? current.name);
    await this.options.directory?.reload();
    return view(record, code);
  }

  /** Removes it; its pending deliveries then fail, saying so. */
  async delete(sourceId: string, id: string): Promise<void> {
    await this.requireFunction(sourceId, id);
    if (!(await this.store.deleteFunctionDestination(id))) throw notFound(id);
    await this.options.directory?.reload();
  }

  /** Runs code on sample events with the real network rules; stores nothing. */
  async test(input: unknown): Promise<{ results: FunctionTestResult[] }> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['code', 'settings', 'events']);
    const events = body['events'];
    if (!Array.isArray(events) || events.length === 0 || events.length > MAX_FUNCTION_TEST_EVENTS || !events.every(isJsonObject)) {
      throw new ApiError('invalid_request', `events must be a list of 1 to ${MAX_FUNCTION_TEST_EVENTS} message objects`);
    }
    const settings = checkedSettings(body['settings'] ?? {});
    const code = await this.checkedCode(body['code']);
    const { limits, allowPrivateReceivers, userAgent, deliveryTimeoutMs } = this.options;
    // Its own isolate and connections, disposed after: a test never shares them with live traffic.
    const fetcher = new FunctionFetcher({ timeoutMs: deliveryTimeoutMs, allowPrivateReceivers, userAgent, ...DEFAULT_FETCH_BOUNDS });
    const runner = new FunctionRunner(limits, fetcher, 1);
    try {
      const results: FunctionTestResult[] = [];
      const now = this.now();
      const ingest = { receivedAt: now, receivedAtIso: new Date(now).toISOString(), newMessageId };
      for (const event of events) {
        // As ingest would have stored it: the handler reads messageId, timestamp… as it will live.
        const { event: stored, filled, ingestRejects } = asIngested(event, ingest);
        const run = await runner.run({ id: 'test', version: 0, code }, JSON.stringify(stored), settings);
        results.push({
          input: event,
          filled,
          ...(ingestRejects !== undefined && { ingestRejects }),
          outcome: run.outcome,
          ...(run.error !== undefined && { error: run.error }),
          ...(run.errorType !== undefined && { errorType: run.errorType }),
          fetches: run.fetches,
          logs: run.logs,
          durationMs: run.durationMs,
        });
      }
      return { results };
    } finally {
      runner.dispose();
      await fetcher.destroy();
    }
  }

  private async requireSource(sourceId: string): Promise<void> {
    if ((await this.store.getSource(sourceId)) === undefined) throw new ApiError('not_found', `no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
  }

  private async requireFunction(sourceId: string, id: string): Promise<FunctionDestinationRecord> {
    await this.requireSource(sourceId);
    const record = await this.store.getFunctionDestination(id);
    // Another source's function is not found here: its settings are that source's.
    if (record === undefined || record.sourceId !== sourceId) throw notFound(id);
    return record;
  }

  private async checkedCode(value: unknown): Promise<string> {
    if (typeof value !== 'string' || value.trim() === '') throw new ApiError('invalid_function', 'code must be a non-empty string of JavaScript');
    // Stored as text, which PostgreSQL cannot hold U+0000 in; in a string literal, write it as \u0000 there.
    if (value.includes('\u0000')) throw new ApiError('invalid_function', 'code must not hold U+0000 (write it as \\u0000 in a string literal)');
    try {
      await checkFunctionCode(value, this.options.limits);
    } catch (error) {
      if (error instanceof CodeError) throw new ApiError('invalid_function', error.message, { cause: error });
      throw error;
    }
    return value;
  }
}

function checkedName(value: unknown): string {
  const problem = functionNameProblem(value);
  if (problem !== undefined) throw new ApiError('invalid_request', problem);
  return value as string;
}

function checkedSettings(value: unknown): JsonObject {
  const problem = settingsProblem(value);
  if (problem !== undefined) throw new ApiError('invalid_request', problem);
  return value as JsonObject;
}

/** undefined: not sent; null: remove the cap. */
function checkedRate(value: unknown): number | null | undefined {
  if (value === undefined || value === null) return value;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_REQUESTS_PER_SECOND) {
    throw new ApiError('invalid_request', `maxRequestsPerSecond must be an integer from 1 to ${MAX_REQUESTS_PER_SECOND}`);
  }
  return value;
}

function refused(saved: FunctionDestinationRecord | FunctionWriteRefusal, sourceId: string, name: string): FunctionDestinationRecord {
  if (saved === 'limit') throw new ApiError('function_limit_reached', `source ${sourceId} already has ${MAX_FUNCTIONS_PER_SOURCE} function destinations, the most a source may have`);
  if (saved === 'name_taken') throw new ApiError('function_name_taken', `source ${sourceId} already has a function destination named ${JSON.stringify(name)} (the name is its integrations key)`);
  return saved;
}

function notFound(id: string): ApiError {
  return new ApiError('not_found', `no function destination with id ${JSON.stringify(id.slice(0, 60))} on this source`);
}
