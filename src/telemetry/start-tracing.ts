/**
 * Starts the tracing a thread's settings ask for. Apart from tracing.ts (the
 * interface every stage sees) so that the interface does not import its
 * OpenTelemetry implementation, which imports the interface.
 *
 * Each thread that makes spans starts its own (the ingest thread in
 * serve.ts, the stage thread in pipeline/stage-thread.ts): an exporter
 * belongs to one event loop.
 */
import type { TracingSettings } from '../domain/tracing-settings.js';
import { NO_TRACING, type Tracing } from './tracing.js';

/**
 * The tracing the settings ask for: {@link NO_TRACING} when off; on, the
 * OpenTelemetry SDK loaded now, with its OTLP/HTTP exporter and batch
 * processor.
 */
export async function startTracing(settings: TracingSettings): Promise<Tracing> {
  if (!settings.enabled) return NO_TRACING;
  const { OtelTracing } = await import('./otel-tracing.js');
  return OtelTracing.start(settings);
}
