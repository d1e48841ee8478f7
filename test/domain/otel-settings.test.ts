import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_TRACEPARENT_LENGTH, formatTraceparent, normalizeTraceparent, parseTraceparent } from '../../src/domain/traceparent.js';
import { TracingSettingsError, tracingSettingsFromEnv } from '../../src/domain/tracing-settings.js';
import { ConfigError, loadConfig } from '../../src/config.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('traceparent (W3C Trace Context)', () => {
  it('reads a version-00 header', () => {
    assert.deepEqual(parseTraceparent(`00-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, flags: 1 });
    assert.equal(formatTraceparent(TRACE, SPAN, 1), `00-${TRACE}-${SPAN}-01`);
  });

  it('refuses what the spec calls invalid', () => {
    for (const header of [
      undefined,
      '',
      `00-${TRACE.toUpperCase()}-${SPAN}-01`, // uppercase hex
      `00-${'0'.repeat(32)}-${SPAN}-01`, // all-zero trace id
      `00-${TRACE}-${'0'.repeat(16)}-01`, // all-zero parent id
      `ff-${TRACE}-${SPAN}-01`, // version ff
      `00-${TRACE}-${SPAN}-01-extra`, // version 00 has no more fields
      `00-${TRACE}-${SPAN}`, // no flags
      ` 00-${TRACE}-${SPAN}-01`,
      `00-${TRACE.slice(1)}-${SPAN}-01`,
    ]) {
      assert.equal(parseTraceparent(header), undefined, String(header));
    }
  });

  it('reads a later version as 00 when its first fields are 00\'s, and bounds the length', () => {
    assert.equal(normalizeTraceparent(`01-${TRACE}-${SPAN}-03-future`), `00-${TRACE}-${SPAN}-03`);
    const long = `01-${TRACE}-${SPAN}-01-${'a'.repeat(MAX_TRACEPARENT_LENGTH)}`;
    assert.equal(parseTraceparent(long), undefined);
  });
});

describe('tracing settings from OTEL_* variables', () => {
  it('is off without an endpoint, whatever else is set', () => {
    assert.deepEqual(tracingSettingsFromEnv({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }), { enabled: false });
  });

  it('is off when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, endpoint or not', () => {
    assert.equal(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'TRUE' }).enabled, false);
    assert.equal(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).enabled, false);
    assert.equal(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'false' }).enabled, true);
  });

  it('adds /v1/traces to the base endpoint and takes the traces endpoint as given', () => {
    assert.deepEqual(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), {
      enabled: true,
      tracesEndpoint: 'http://collector:4318/v1/traces',
      serviceName: 'switchyard',
      sampler: 'parentbased_always_on',
      ratio: 1,
    });
    const settings = tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/custom' });
    assert.equal(settings.enabled && settings.tracesEndpoint, 'https://b/custom');
  });

  it('reads the sampler, its ratio and the service name', () => {
    const settings = tracingSettingsFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
      OTEL_SERVICE_NAME: 'collector-eu',
    });
    assert.deepEqual(settings, { enabled: true, tracesEndpoint: 'http://c:4318/v1/traces', serviceName: 'collector-eu', sampler: 'parentbased_traceidratio', ratio: 0.1 });
  });

  it('refuses values that cannot be what was meant, naming the variable', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    assert.throws(() => tracingSettingsFromEnv({ ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }), /OTEL_TRACES_SAMPLER_ARG/);
    assert.throws(() => tracingSettingsFromEnv({ ...on, OTEL_TRACES_SAMPLER: 'jaeger_remote' }), /OTEL_TRACES_SAMPLER must be one of/);
    assert.throws(() => tracingSettingsFromEnv({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /grpc is not supported/);
    assert.throws(() => tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }), TracingSettingsError);
    assert.throws(() => tracingSettingsFromEnv({ ...on, OTEL_TRACES_EXPORTER: 'zipkin' }), /OTEL_TRACES_EXPORTER/);
    // serve reports it like any other setting.
    assert.throws(() => loadConfig({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://c' }), (error: unknown) => error instanceof ConfigError && /OTEL_EXPORTER_OTLP_ENDPOINT/.test(error.message));
  });
});
