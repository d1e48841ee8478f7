import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as OTLP/HTTP JSON carries it, with its resource's attributes. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly status: { readonly code?: number; readonly message?: string } | undefined;
  readonly resource: Readonly<Record<string, unknown>>;
}

export interface OtlpSink {
  /** What to put in OTEL_EXPORTER_OTLP_ENDPOINT: the exporter adds /v1/traces. */
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  /** Every request received, with its path and content type. */
  readonly requests: Array<{ readonly path: string; readonly contentType: string | undefined }>;
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

function attributes(list: readonly OtlpAttribute[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) out[key] = value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.boolValue ?? value.doubleValue;
  return out;
}

/**
 * A local OTLP/HTTP receiver: a `node:http` server on a free loopback port
 * that takes `POST /v1/traces` in the JSON encoding (what Switchyard's
 * exporter sends) and keeps every span.
 */
export async function startOtlpSink(): Promise<OtlpSink> {
  const spans: ReceivedSpan[] = [];
  const requests: Array<{ path: string; contentType: string | undefined }> = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      requests.push({ path: request.url ?? '', contentType: request.headers['content-type'] });
      if (request.method !== 'POST' || request.url !== '/v1/traces' || !/json/.test(request.headers['content-type'] ?? '')) {
        response.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: Array<{
          resource?: { attributes?: OtlpAttribute[] };
          scopeSpans?: Array<{ spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: OtlpAttribute[]; status?: { code?: number; message?: string } }> }>;
        }>;
      };
      for (const resourceSpans of body.resourceSpans ?? []) {
        const resource = attributes(resourceSpans.resource?.attributes);
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === undefined || span.parentSpanId === '' ? undefined : span.parentSpanId,
              name: span.name,
              kind: span.kind,
              attributes: attributes(span.attributes),
              status: span.status,
              resource,
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    requests,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
