/**
 * `otel.overhead`: `ingest.live` (see live.ts) with OpenTelemetry tracing on,
 * sampling 10% of new traces (`parentbased_traceidratio`, 0.1) and exporting
 * to a local OTLP/HTTP sink in this process, against the same bench with
 * tracing off, in the same run. Target: on ≥ 0.9 of off. The sink answers
 * every POST /v1/traces with 200 and counts what it got, so the exporter
 * does its full work (serialize, POST) without a collector's CPU in the
 * measurement.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BenchDefinition, BenchReport } from './lib/bench-types.js';
import { measure, round, serversGetTwoCpus, summary } from './live.js';

const SAMPLED_RATIO = 0.1;
const TARGET = 0.9;

interface Sink {
  readonly endpoint: string;
  readonly exports: () => { requests: number; bytes: number };
  close(): Promise<void>;
}

async function startSink(): Promise<Sink> {
  let requests = 0;
  let bytes = 0;
  const server = http.createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (bytes += chunk.length));
    request.on('end', () => {
      requests++;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => ({ requests, bytes }),
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

export const otelBenches: readonly BenchDefinition[] = [
  {
    name: 'otel.overhead',
    async run(pinnedContext): Promise<BenchReport> {
      const context = serversGetTwoCpus(pinnedContext);
      const workers = String(Math.max(1, (await import('node:os')).availableParallelism() - 1));
      // Off: no endpoint (an empty one clears an inherited variable), so nothing of OpenTelemetry is loaded.
      const off = await measure(context, 'switchyard, tracing off', workers, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' } });
      const sink = await startSink();
      let on;
      try {
        on = await measure(context, `switchyard, tracing on at ${SAMPLED_RATIO}`, workers, {
          env: {
            OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
            OTEL_SDK_DISABLED: 'false',
            OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
            OTEL_TRACES_SAMPLER_ARG: String(SAMPLED_RATIO),
          },
        });
      } finally {
        await sink.close();
      }
      const exported = sink.exports();
      if (exported.requests === 0) throw new Error('otel.overhead: tracing on exported nothing to the sink; the variant did not trace');
      const ratio = on.load.requestsPerSec / off.load.requestsPerSec;
      return {
        description: `ingest.live with OpenTelemetry tracing on (${SAMPLED_RATIO} of traces sampled, exported over OTLP/HTTP to a local sink) vs off`,
        metric: 'requests/s',
        ratio: round(ratio, 3),
        target: TARGET,
        pass: ratio >= TARGET && on.allDelivered,
        loadGenerator: off.load.generator,
        cpus: context.cpus.pinned ? `pinned: Switchyard on CPU(s) ${context.cpus.server}` : `unpinned: every process shares ${context.cpus.available.length} CPU(s)`,
        exportRequests: exported.requests,
        exportBytes: exported.bytes,
        tracingOff: summary(off),
        tracingOn: summary(on),
      };
    },
  },
];
