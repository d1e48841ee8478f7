/**
 * OpenTelemetry tracing end to end: a real `serve` process (the stage
 * thread on, so both threads' exporters are used), a local OTLP/HTTP
 * receiver, a Webhooks receiver. On: the request, processing and delivery
 * attempt spans arrive in the client's trace, and the receiver gets a
 * `traceparent` naming the attempt's span. Off: no module of OpenTelemetry
 * is loaded (a module resolution hook in the child records them; the "on"
 * test proves it records) and no traceparent is invented.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { startChildSwitchyard } from '../helpers/child-switchyard.js';
import { type ReceivedSpan, startOtlpSink } from '../helpers/otlp-sink.js';
import { describePostgres, freshDatabase } from '../helpers/postgres.js';
import { type ReceivedRequest, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

const RECORDER = path.resolve(import.meta.dirname, '..', 'helpers', 'module-load-recorder.js');

const admin = async (url: string, method: string, route: string, body: unknown): Promise<any> => {
  const response = await fetch(`${url}/admin/v1${route}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json: unknown = await response.json();
  assert.ok(response.ok, `${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
  return json;
};

/** A source whose Webhooks destination posts to `receiverUrl`. */
async function sourceDeliveringTo(url: string, receiverUrl: string): Promise<{ id: string; writeKey: string }> {
  const source = (await admin(url, 'POST', '/sources', { name: `otel-${randomBytes(3).toString('hex')}` })) as { id: string; writeKey: string };
  await admin(url, 'PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiverUrl }] } });
  return source;
}

async function track(url: string, writeKey: string, messageId: string, traceparent: string | undefined): Promise<void> {
  const response = await fetch(`${url}/v1/track`, {
    method: 'POST',
    headers: { authorization: basicAuth(writeKey), 'content-type': 'application/json', ...(traceparent !== undefined && { traceparent }) },
    body: JSON.stringify({ userId: 'u1', event: 'Traced', messageId }),
  });
  assert.equal(response.status, 200, await response.text());
}

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const messageIdOf = (request: ReceivedRequest): string => (JSON.parse(request.body) as { messageId: string }).messageId;

/** The request the receiver got for `messageId`, once it has. */
async function receivedFor(requests: readonly ReceivedRequest[], messageId: string): Promise<ReceivedRequest> {
  return eventually(() => requests.find((r) => messageIdOf(r) === messageId), 20_000, `the receiver to get ${messageId}`);
}

function recordedModules(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((line) => line !== '') : [];
}

const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-otel-'));
  dirs.push(dir);
  return dir;
};
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * The whole chain on one store: a track with a traceparent, its spans in
 * that trace, the receiver's traceparent naming the attempt's span; a
 * malformed traceparent starts a new trace instead of being passed on.
 */
async function tracesOneMessage(store: Record<string, string>): Promise<void> {
  const sink = await startOtlpSink();
  const receiver = await startReceiver();
  const dir = tempDir();
  const modules = path.join(dir, 'modules.txt');
  const server = await startChildSwitchyard({
    SWITCHYARD_DATA_DIR: path.join(dir, 'data'),
    SWITCHYARD_WORKERS: '1',
    SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '1',
    OTEL_SERVICE_NAME: 'switchyard-otel-test',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    NODE_OPTIONS: `--import ${RECORDER}`,
    RECORD_MODULES_TO: modules,
    ...store,
  });
  try {
    const source = await sourceDeliveringTo(server.url, receiver.url);
    const traceId = hex(16);
    const clientSpanId = hex(8);
    await track(server.url, source.writeKey, 'm-traced', `00-${traceId}-${clientSpanId}-01`);
    // Uppercase hex is not a valid traceparent: a new trace, never the client's ids.
    const badTraceId = hex(16);
    await track(server.url, source.writeKey, 'm-bad-parent', `00-${badTraceId.toUpperCase()}-${hex(8).toUpperCase()}-01`);

    const delivered = await receivedFor(receiver.requests, 'm-traced');
    const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(delivered.headers['traceparent']));
    assert.ok(sent, `the receiver got a traceparent: ${String(delivered.headers['traceparent'])}`);
    assert.equal(sent[1], traceId, 'in the client\'s trace');
    assert.notEqual(sent[2], clientSpanId, 'naming a span of ours, not the client\'s');

    const inTrace = (): ReceivedSpan[] => sink.spans.filter((span) => span.traceId === traceId);
    const find = (name: string): ReceivedSpan | undefined => inTrace().find((span) => span.name === name);
    await eventually(
      () => (find('POST /v1/track') && find('process') && find('deliver webhooks') ? true : undefined),
      20_000,
      `the request, processing and delivery spans in trace ${traceId}; got ${JSON.stringify(sink.spans.map((s) => [s.traceId, s.name]))}`,
    );
    const request = find('POST /v1/track')!;
    const processing = find('process')!;
    const attempt = find('deliver webhooks')!;
    assert.equal(request.parentSpanId, clientSpanId, 'the request span is a child of the client\'s span');
    assert.equal(processing.parentSpanId, request.spanId, 'processing is a child of the request');
    assert.equal(attempt.parentSpanId, processing.spanId, 'the attempt is a child of processing (through the stored traceparent)');
    assert.equal(attempt.spanId, sent[2], 'the receiver\'s traceparent names the attempt span');
    assert.equal(request.attributes['http.response.status_code'], 200);
    assert.equal(request.attributes['switchyard.source.id'], source.id);
    assert.equal(attempt.attributes['http.response.status_code'], 200);
    assert.equal(attempt.attributes['switchyard.delivery.attempt'], 1);
    assert.equal(request.resource['service.name'], 'switchyard-otel-test');
    assert.equal(attempt.resource['service.name'], 'switchyard-otel-test', 'the stage thread\'s exporter names the service too');

    const other = await receivedFor(receiver.requests, 'm-bad-parent');
    const otherParent = /^00-([0-9a-f]{32})-[0-9a-f]{16}-0[01]$/.exec(String(other.headers['traceparent']));
    assert.ok(otherParent, `a valid traceparent of a new trace: ${String(other.headers['traceparent'])}`);
    assert.notEqual(otherParent[1], badTraceId);
    assert.notEqual(otherParent[1], traceId);

    assert.ok(sink.requests.every((r) => r.path === '/v1/traces' && /json/.test(r.contentType ?? '')), JSON.stringify(sink.requests));
    assert.ok(recordedModules(modules).some((url) => url.includes('/@opentelemetry/')), 'the recorder sees OpenTelemetry when it is loaded');
  } finally {
    await server.kill('SIGKILL');
    await receiver.close();
    await sink.close();
  }
}

describe('OpenTelemetry tracing', () => {
  it('on (SQLite): spans of the request, processing and the attempt in the client\'s trace; the receiver gets its traceparent', { timeout: 60_000 }, async () => {
    await tracesOneMessage({});
  });

  it('off: nothing of OpenTelemetry is loaded, nothing exported, no traceparent sent', { timeout: 60_000 }, async () => {
    const sink = await startOtlpSink();
    const receiver = await startReceiver();
    const dir = tempDir();
    const modules = path.join(dir, 'modules.txt');
    // An endpoint is set, but OTEL_SDK_DISABLED wins.
    const server = await startChildSwitchyard({
      SWITCHYARD_DATA_DIR: path.join(dir, 'data'),
      SWITCHYARD_WORKERS: '1',
      SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
      OTEL_SDK_DISABLED: 'true',
      OTEL_TRACES_SAMPLER: 'always_on',
      NODE_OPTIONS: `--import ${RECORDER}`,
      RECORD_MODULES_TO: modules,
    });
    try {
      const source = await sourceDeliveringTo(server.url, receiver.url);
      await track(server.url, source.writeKey, 'm-untraced', `00-${hex(16)}-${hex(8)}-01`);
      const delivered = await receivedFor(receiver.requests, 'm-untraced');
      assert.equal(delivered.headers['traceparent'], undefined, 'no traceparent passed on or invented');
      assert.deepEqual(recordedModules(modules), []);
      assert.deepEqual(sink.requests, []);
    } finally {
      await server.kill('SIGKILL');
      await receiver.close();
      await sink.close();
    }
  });
});

await describePostgres('OpenTelemetry tracing on PostgreSQL', () => {
  it('on: the traceparent stored with the message reaches the delivery attempt', { timeout: 60_000 }, async () => {
    const db = await freshDatabase();
    try {
      await tracesOneMessage({ DATABASE_URL: db.url });
    } finally {
      await db.drop();
    }
  });
});
