/**
 * Module resolution hooks (registered by module-load-recorder.ts) that
 * append to a file every module URL resolved that belongs to
 * OpenTelemetry, or is Switchyard's own file that loads it.
 */
import { appendFileSync } from 'node:fs';

let file: string | undefined;

export function initialize(data: { file: string }): void {
  file = data.file;
}

type NextResolve = (specifier: string, context: unknown) => Promise<{ url: string }>;

export async function resolve(specifier: string, context: unknown, nextResolve: NextResolve): Promise<{ url: string }> {
  const result = await nextResolve(specifier, context);
  if (file !== undefined && /\/@opentelemetry\/|\/telemetry\/otel-tracing\.js$/.test(result.url)) appendFileSync(file, `${result.url}\n`);
  return result;
}
