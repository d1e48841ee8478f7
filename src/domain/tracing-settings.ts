/**
 * OpenTelemetry tracing settings, read from the standard `OTEL_*`
 * variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/).
 * Pure: the environment comes in as an object.
 *
 * The switch: tracing is on when an OTLP endpoint is set
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`)
 * and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says
 * otherwise. Off, nothing of OpenTelemetry is loaded (see src/telemetry/).
 */

export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

const SAMPLERS: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

export interface TracingOn {
  readonly enabled: true;
  /** Where spans go: the traces URL itself (`…/v1/traces`). */
  readonly tracesEndpoint: string;
  readonly serviceName: string;
  readonly sampler: SamplerName;
  /** For the `traceidratio` samplers: the share of new traces kept, 0 to 1. */
  readonly ratio: number;
}

export interface TracingOff {
  readonly enabled: false;
}

export type TracingSettings = TracingOn | TracingOff;

export const TRACING_OFF: TracingOff = Object.freeze({ enabled: false });

/** A setting with a value the spec does not allow: `serve` refuses to start, naming it. */
export class TracingSettingsError extends Error {
  override readonly name = 'TracingSettingsError';
}

const MAX_ENDPOINT_LENGTH = 2_000;
const MAX_SERVICE_NAME_LENGTH = 256;

/** The tracing settings of an environment; throws {@link TracingSettingsError} on a value that cannot be what was meant. */
export function tracingSettingsFromEnv(env: Readonly<Record<string, string | undefined>>): TracingSettings {
  const value = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  if (value('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return TRACING_OFF;
  const exporter = value('OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter === 'none') return TRACING_OFF;
  const tracesEndpoint = value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseEndpoint = value('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (tracesEndpoint === undefined && baseEndpoint === undefined) return TRACING_OFF;

  if (exporter !== undefined && exporter !== 'otlp') {
    throw new TracingSettingsError(`OTEL_TRACES_EXPORTER must be "otlp" or "none", got ${JSON.stringify(exporter)}`);
  }
  const protocol = value('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? value('OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol === 'grpc') {
    throw new TracingSettingsError('OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: Switchyard exports OTLP over HTTP (http/json); point it at the collector\'s HTTP port (4318)');
  }
  // The traces endpoint is used as given; the base one gets the signal's path (the spec's rule).
  const endpoint = tracesEndpoint ?? `${baseEndpoint!.replace(/\/+$/, '')}/v1/traces`;
  const name = tracesEndpoint === undefined ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT';
  if (!isHttpUrl(endpoint)) throw new TracingSettingsError(`${name} must be an http:// or https:// URL, got ${JSON.stringify(endpoint.slice(0, 200))}`);

  const serviceName = value('OTEL_SERVICE_NAME') ?? 'switchyard';
  if (serviceName.length > MAX_SERVICE_NAME_LENGTH) throw new TracingSettingsError(`OTEL_SERVICE_NAME is longer than ${MAX_SERVICE_NAME_LENGTH} characters`);

  const samplerValue = (value('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on').toLowerCase();
  if (!(SAMPLERS as readonly string[]).includes(samplerValue)) {
    throw new TracingSettingsError(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}, got ${JSON.stringify(samplerValue.slice(0, 100))}`);
  }
  const sampler = samplerValue as SamplerName;
  let ratio = 1;
  const arg = value('OTEL_TRACES_SAMPLER_ARG');
  if (sampler.endsWith('traceidratio') && arg !== undefined) {
    ratio = Number(arg);
    if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
      throw new TracingSettingsError(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 for ${sampler}, got ${JSON.stringify(arg.slice(0, 100))}`);
    }
  }
  return Object.freeze({ enabled: true, tracesEndpoint: endpoint, serviceName, sampler, ratio });
}

function isHttpUrl(text: string): boolean {
  if (text.length > MAX_ENDPOINT_LENGTH) return false;
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}
