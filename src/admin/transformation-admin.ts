import { isJsonObject, type JsonObject } from '../domain/message.js';
import { asIngested } from '../domain/test-event.js';
import { parseWebhookSettings } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';
import type { Store, TransformationRecord, TransformationVersionRecord } from '../store/store.js';
import { CodeError, TransformationRunner, checkTransformationCode } from '../transformations/transformation-runner.js';
import { newMessageId, newTransformationId } from '../util/ids.js';
import { refuseNul, rejectUnknownFields, requireName, requireObject } from './validate.js';

export interface TransformationView {
  readonly id: string;
  readonly name: string;
  readonly version: number;
  readonly code: string;
  readonly createdAt: string;
}

export interface TestResult {
  readonly input: unknown;
  /** What ingest would have added to the input (see domain/test-event.ts); the code ran on the input with these. */
  readonly filled: JsonObject;
  readonly ingestRejects?: string;
  readonly output?: unknown;
  readonly dropped?: true;
  readonly error?: string;
  readonly logs: readonly string[];
}

/** Most sample events one test runs. */
export const MAX_TEST_EVENTS = 100;

/**
 * Most output one test answers, in JSON characters: 100 events may each
 * return up to 100 objects of 32 KB, and a 1 KB request made a 320 MB
 * answer (and 2 GB of the server's memory to build it). Past it the events
 * left are not run, and say so.
 */
export const MAX_TEST_OUTPUT_CHARS = 4 * 1024 * 1024;

/**
 * Tests that run at once on one server: each has an isolate of its own
 * (up to the per-isolate memory limit) outside the total that live
 * transformations share. Past it a test is refused `503 overloaded`.
 */
export const MAX_CONCURRENT_TESTS = 4;

const view = (record: TransformationVersionRecord): TransformationView => ({
  id: record.id,
  name: record.name,
  version: record.version,
  code: record.code,
  createdAt: new Date(record.createdAt).toISOString(),
});

const listView = (record: TransformationRecord): Omit<TransformationView, 'code'> & { updatedAt: string } => ({
  id: record.id,
  name: record.name,
  version: record.version,
  createdAt: new Date(record.createdAt).toISOString(),
  updatedAt: new Date(record.updatedAt).toISOString(),
});

/**
 * Transformations over the admin API and the CLI: every save compiles the
 * code in a throwaway isolate first (`invalid_transformation` with line and
 * column), and is a new version.
 */
export class TransformationAdmin {
  private testsRunning = 0;

  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    private readonly limits: SandboxLimits,
  ) {}

  async create(input: unknown): Promise<TransformationView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'code']);
    const name = requireName(body['name']);
    const code = await this.checkedCode(body['code']);
    return view(await this.store.insertTransformation(newTransformationId(), name, code, this.now()));
  }

  async update(id: string, input: unknown): Promise<TransformationView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'code']);
    const name = body['name'] === undefined ? undefined : requireName(body['name']);
    const code = await this.checkedCode(body['code']);
    const saved = await this.store.addTransformationVersion(id, code, name, this.now());
    if (saved === undefined) throw notFound(id);
    return view(saved);
  }

  async list(): Promise<{ transformations: Array<ReturnType<typeof listView>> }> {
    return { transformations: (await this.store.listTransformations()).map(listView) };
  }

  async get(id: string): Promise<TransformationView & { versions: Array<{ version: number; createdAt: string }> }> {
    const latest = await this.store.getTransformationVersion(id);
    if (latest === undefined) throw notFound(id);
    const versions = (await this.store.listTransformationVersions(id)).map((v) => ({ version: v.version, createdAt: new Date(v.createdAt).toISOString() }));
    return { ...view(latest), versions };
  }

  async getVersion(id: string, version: string): Promise<TransformationView> {
    const n = Number(version);
    if (!/^\d{1,9}$/.test(version) || n < 1) throw new ApiError('invalid_request', 'version must be a version number (1, 2, …)');
    const record = await this.store.getTransformationVersion(id, n);
    if (record === undefined) throw new ApiError('not_found', `transformation ${JSON.stringify(id.slice(0, 60))} has no version ${n}`);
    return view(record);
  }

  async delete(id: string): Promise<void> {
    const users = (await this.store.listDestinations()).filter((d) => {
      const parsed = parseWebhookSettings(d.settings);
      return parsed.ok && parsed.settings.transformation?.id === id;
    });
    if (users.length > 0) {
      throw new ApiError('transformation_in_use', `transformation ${id} is attached to the Webhooks destination of ${users.map((u) => u.sourceId).join(', ')}; detach it first`);
    }
    if (!(await this.store.deleteTransformation(id))) throw notFound(id);
  }

  /** Runs code (given, or a stored version) on sample events; stores nothing. */
  async test(input: unknown): Promise<{ results: TestResult[]; durationMs: number }> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['code', 'id', 'version', 'events']);
    const events = body['events'];
    if (!Array.isArray(events) || events.length === 0 || events.length > MAX_TEST_EVENTS || !events.every(isJsonObject)) {
      throw new ApiError('invalid_request', `events must be a list of 1 to ${MAX_TEST_EVENTS} message objects`);
    }
    let code: string;
    let id = 'test';
    let version = 0;
    let name = 'test';
    if (body['code'] !== undefined) {
      code = await this.checkedCode(body['code']);
    } else {
      if (typeof body['id'] !== 'string') throw new ApiError('invalid_request', 'give either code or the id (and version) of a stored transformation');
      refuseNul(body['id'], 'id');
      const wanted = body['version'];
      if (wanted !== undefined && (typeof wanted !== 'number' || !Number.isInteger(wanted) || wanted < 1)) throw new ApiError('invalid_request', 'version must be a version number (1, 2, …)');
      const stored = await this.store.getTransformationVersion(body['id'], wanted);
      if (stored === undefined) throw notFound(body['id']);
      ({ code, id, version, name } = stored);
    }
    if (this.testsRunning >= MAX_CONCURRENT_TESTS) {
      throw new ApiError('overloaded', `${MAX_CONCURRENT_TESTS} transformation tests are running already; try again when one has ended`);
    }
    this.testsRunning += 1;
    // Its own isolate, disposed after: a test never shares one with live traffic.
    const runner = new TransformationRunner(this.limits, 1);
    const started = performance.now();
    try {
      const results: TestResult[] = [];
      let outputChars = 0;
      const now = this.now();
      const ingest = { receivedAt: now, receivedAtIso: new Date(now).toISOString(), newMessageId };
      for (const event of events) {
        // As ingest would have stored it: the code reads messageId, timestamp… as it will live.
        const { event: stored, filled, ingestRejects } = asIngested(event, ingest);
        const base = { input: event, filled, ...(ingestRejects === undefined ? {} : { ingestRejects }) };
        if (outputChars > MAX_TEST_OUTPUT_CHARS) {
          results.push({ ...base, error: `not run: the outputs before it are over ${MAX_TEST_OUTPUT_CHARS / 1024 / 1024} MB, the most one test answers; test fewer events`, logs: [] });
          continue;
        }
        const messageId = typeof stored['messageId'] === 'string' ? stored['messageId'] : undefined;
        const run = await runner.run({ id, name, version, code }, JSON.stringify(stored), { sourceId: 'test', sourceName: 'test', messageId });
        const { outcome } = run;
        if (outcome.kind === 'dropped') results.push({ ...base, dropped: true, logs: run.logs });
        else if (outcome.kind === 'error') results.push({ ...base, error: outcome.error, logs: run.logs });
        else {
          for (const output of outcome.bodies) outputChars += output.length;
          const outputs = outcome.bodies.map((b) => JSON.parse(b) as unknown);
          results.push({ ...base, output: outputs.length === 1 ? outputs[0] : outputs, logs: run.logs });
        }
      }
      return { results, durationMs: Math.round((performance.now() - started) * 100) / 100 };
    } finally {
      runner.dispose();
      this.testsRunning -= 1;
    }
  }

  private async checkedCode(value: unknown): Promise<string> {
    if (typeof value !== 'string' || value.trim() === '') throw new ApiError('invalid_transformation', 'code must be a non-empty string of JavaScript');
    // Stored as text, which PostgreSQL cannot hold U+0000 in; in a string literal, write it as \u0000 there.
    if (value.includes('\u0000')) throw new ApiError('invalid_transformation', 'code must not hold U+0000 (write it as \\u0000 in a string literal)');
    try {
      await checkTransformationCode(value, this.limits);
    } catch (error) {
      if (error instanceof CodeError) throw new ApiError('invalid_transformation', error.message, { cause: error });
      throw error;
    }
    return value;
  }
}

function notFound(id: string): ApiError {
  return new ApiError('not_found', `no transformation with id ${JSON.stringify(id.slice(0, 60))}`);
}
