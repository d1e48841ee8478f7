/**
 * The OpenTelemetry side of {@link Tracing}: the only file that imports
 * `@opentelemetry/*`, loaded by `startTracing` (start-tracing.ts) only when tracing is on.
 *
 * No global provider or context manager is registered: spans get their
 * parent from the `traceparent` each caller holds (stored with the message),
 * so nothing in Switchyard pays for async context tracking, and no library
 * loaded beside it starts exporting through our provider.
 */
import { ROOT_CONTEXT, SpanKind as OtelSpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { formatTraceparent, parseTraceparent } from '../domain/traceparent.js';
import type { SamplerName, TracingOn } from '../domain/tracing-settings.js';
import { VERSION } from '../version.js';
import type { SpanAttributes, SpanKind, SpanOptions, TraceSpan, Tracing } from './tracing.js';

const KINDS: Record<SpanKind, OtelSpanKind> = {
  server: OtelSpanKind.SERVER,
  client: OtelSpanKind.CLIENT,
  producer: OtelSpanKind.PRODUCER,
  consumer: OtelSpanKind.CONSUMER,
  internal: OtelSpanKind.INTERNAL,
};

function sampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

class OtelSpan implements TraceSpan {
  constructor(private readonly span: Span) {}

  get traceparent(): string {
    const context = this.span.spanContext();
    return formatTraceparent(context.traceId, context.spanId, context.traceFlags);
  }

  setAttribute(key: string, value: string | number | boolean): void {
    this.span.setAttribute(key, value);
  }

  fail(description: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: description.slice(0, 500) });
  }

  end(): void {
    this.span.end();
  }
}

export class OtelTracing implements Tracing {
  readonly enabled = true;

  private constructor(
    private readonly provider: BasicTracerProvider,
    private readonly tracer: Tracer,
  ) {}

  static start(settings: TracingOn): OtelTracing {
    // OTEL_RESOURCE_ATTRIBUTES first; the service name and version win over it.
    const resource = detectResources({ detectors: [envDetector] }).merge(
      resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName, [ATTR_SERVICE_VERSION]: VERSION }),
    );
    // The exporter reads OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and _COMPRESSION
    // itself; the URL is the one the settings resolved. The batch processor
    // reads OTEL_BSP_* (delay, queue and batch sizes).
    const exporter = new OTLPTraceExporter({ url: settings.tracesEndpoint });
    const provider = new BasicTracerProvider({
      resource,
      sampler: sampler(settings.sampler, settings.ratio),
      spanProcessors: [new BatchSpanProcessor(exporter)],
    });
    return new OtelTracing(provider, provider.getTracer('switchyard', VERSION));
  }

  startSpan(name: string, options: SpanOptions = {}): TraceSpan {
    const parent = parseTraceparent(options.parent);
    const context =
      parent === undefined
        ? ROOT_CONTEXT
        : trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.flags, isRemote: true });
    const span = this.tracer.startSpan(name, { kind: KINDS[options.kind ?? 'internal'], attributes: definedOnly(options.attributes) }, context);
    return new OtelSpan(span);
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}

function definedOnly(attributes: SpanAttributes | undefined): Record<string, string | number | boolean> | undefined {
  if (attributes === undefined) return undefined;
  const out: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value;
  return out;
}
