/**
 * Tracing as the rest of Switchyard sees it: spans started by name with a
 * W3C `traceparent` as their parent, and nothing else. OpenTelemetry itself
 * lives in `otel-tracing.ts`, which only `startTracing` (start-tracing.ts)
 * loads, with a dynamic `import()`, when the settings turn tracing on: off,
 * no module of OpenTelemetry is ever loaded and every span is
 * {@link NO_SPAN}.
 */

export type SpanKind = 'server' | 'client' | 'producer' | 'consumer' | 'internal';
export type SpanAttributes = Readonly<Record<string, string | number | boolean | undefined>>;

export interface SpanOptions {
  readonly kind?: SpanKind;
  /** The parent as a `traceparent` header (validated by the caller or not: an invalid one starts a new trace). */
  readonly parent?: string | undefined;
  readonly attributes?: SpanAttributes;
}

/** One span; {@link NO_SPAN} when tracing is off. */
export interface TraceSpan {
  /** This span as a `traceparent` to store or send on (children hang under it); undefined when tracing is off. */
  readonly traceparent: string | undefined;
  setAttribute(key: string, value: string | number | boolean): void;
  /** Marks the span failed (status ERROR) with this description. */
  fail(description: string): void;
  end(): void;
}

export interface Tracing {
  readonly enabled: boolean;
  startSpan(name: string, options?: SpanOptions): TraceSpan;
  /** Exports what is left and stops; the process or thread is ending. */
  shutdown(): Promise<void>;
}

export const NO_SPAN: TraceSpan = Object.freeze({
  traceparent: undefined,
  setAttribute: () => {},
  fail: () => {},
  end: () => {},
});

/** Tracing off: nothing loaded, nothing recorded, no traceparent made up. */
export const NO_TRACING: Tracing = Object.freeze({
  enabled: false,
  startSpan: () => NO_SPAN,
  shutdown: async () => {},
});

/** What a delivery attempt's span says about the attempt. */
export interface DeliveryAttemptFacts {
  /** `webhooks`, `function`, …: the destination kind making the attempt. */
  readonly destination: string;
  readonly deliveryId: number;
  /** 1 for the first round of the delivery. */
  readonly attempt: number;
  /** The message's stored traceparent: the attempt's span is its child. */
  readonly traceparent: string | undefined;
  /** The receiver; only its origin is recorded (a path or query may hold a token). */
  readonly url?: string | undefined;
}

/** The span of one delivery attempt, and the headers to send with it. */
export interface DeliveryAttemptSpan {
  /** `{traceparent}` to send to the receiver when tracing is on; empty when off. */
  readonly headers: Readonly<Record<string, string>>;
  /** Ends the span with the receiver's answer (a status code) or the error that took its place. */
  finish(result: { readonly statusCode?: number | undefined; readonly error?: string | undefined }): void;
}

const NO_ATTEMPT: DeliveryAttemptSpan = Object.freeze({ headers: Object.freeze({}), finish: () => {} });

/**
 * Starts the span of one delivery attempt (one POST, one function call) as
 * a child of the message's trace. Every destination kind calls this, so
 * their attempts look alike in a trace: name `deliver <destination>`,
 * kind client, the delivery id and round, the receiver's origin, and the
 * status code or error. A 4xx/5xx or an error marks the span failed.
 */
export function startDeliveryAttempt(tracing: Tracing, facts: DeliveryAttemptFacts): DeliveryAttemptSpan {
  if (!tracing.enabled) return NO_ATTEMPT;
  const span = tracing.startSpan(`deliver ${facts.destination}`, {
    kind: 'client',
    parent: facts.traceparent,
    attributes: {
      'switchyard.destination': facts.destination,
      'switchyard.delivery.id': facts.deliveryId,
      'switchyard.delivery.attempt': facts.attempt,
      'server.address': facts.url === undefined ? undefined : originOf(facts.url),
    },
  });
  const traceparent = span.traceparent;
  return {
    headers: traceparent === undefined ? {} : { traceparent },
    finish(result) {
      if (result.statusCode !== undefined) span.setAttribute('http.response.status_code', result.statusCode);
      if (result.error !== undefined) span.fail(result.error);
      else if (result.statusCode !== undefined && result.statusCode >= 400) span.fail(`HTTP ${result.statusCode}`);
      span.end();
    },
  };
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}
