import { performance } from 'node:perf_hooks';
import { Agent, buildConnector } from 'undici';
import { PrivateAddressError, guardedLookup, refuseLiteral } from '../delivery/address-guard.js';
import type { FetchRecord } from '../store/store.js';

/**
 * The host side of a function's `fetch`: requests made with undici under
 * the receivers' rules (the same SSRF guard as webhooks, `guardedLookup`,
 * which pins the connection to the address it checked; TLS verified;
 * redirects never followed, the 3xx is the answer; the delivery timeout per
 * request), and the per-call bounds (requests per call, request and
 * response body sizes). Only plain data goes in and out: the isolate sends
 * a JSON string and gets a JSON string back.
 */
export interface FetchLimits {
  /** Per request, from start to the end of the response body. */
  readonly timeoutMs: number;
  readonly allowPrivateReceivers: boolean;
  /** The `User-Agent` when the function sets none. */
  readonly userAgent: string;
  readonly maxRequestsPerCall: number;
  readonly maxRequestBodyBytes: number;
  readonly maxResponseBodyBytes: number;
  /** Connections kept per origin (16 when absent). */
  readonly connectionsPerOrigin?: number;
}

export const DEFAULT_FETCH_BOUNDS = {
  maxRequestsPerCall: 10,
  maxRequestBodyBytes: 1024 * 1024,
  maxResponseBodyBytes: 1024 * 1024,
} as const;

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Headers the connection owns (undici sets them, or they would change what is sent where). */
const FORBIDDEN_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer', 'proxy-authorization', 'proxy-connection']);
const MAX_HEADERS = 100;
const MAX_HEADER_BYTES = 64 * 1024;
const MAX_URL_CHARS = 16 * 1024;
/** RFC 9110 token: a header name. The isolate's Headers checks too, but user code can change what it sends. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What would end a header line early (header injection). */
const HEADER_VALUE_BREAK = /[\0\r\n]/;
/** TLS errors that mean the certificate cannot be trusted; retrying would not help (as webhook-sender.ts). */
const UNTRUSTED_CERTIFICATE = /^(ERR_TLS_CERT_ALTNAME_INVALID|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE|CERT_UNTRUSTED|CERT_REJECTED)/;

interface CheckedRequest {
  readonly method: string;
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
}

/** What the isolate gets back: the answer, or a failure whose text becomes the TypeError's message. */
type FetchAnswer =
  | { readonly status: number; readonly statusText: string; readonly headers: Array<[string, string]>; readonly body: string; readonly url: string }
  | { readonly error: string; readonly retriable: boolean };

/** One undici agent for every function of a worker (one keep-alive pool per origin). */
export class FunctionFetcher {
  private readonly agent: Agent;

  constructor(readonly limits: FetchLimits) {
    const connect = buildConnector({
      timeout: limits.timeoutMs,
      rejectUnauthorized: true,
      ...(limits.allowPrivateReceivers ? {} : { lookup: guardedLookup }),
    });
    this.agent = new Agent({ connections: limits.connectionsPerOrigin ?? 16, headersTimeout: limits.timeoutMs, bodyTimeout: limits.timeoutMs, connect });
  }

  /** Sends one checked request; never rejects. */
  async send(request: CheckedRequest, signal: AbortSignal): Promise<FetchAnswer> {
    if (!this.limits.allowPrivateReceivers) {
      const refused = refuseLiteral(request.url.hostname);
      if (refused !== undefined) return { error: refused.message, retriable: false };
    }
    const timeout = AbortSignal.timeout(this.limits.timeoutMs);
    const both = AbortSignal.any([signal, timeout]);
    try {
      const response = await this.agent.request({
        origin: request.url.origin,
        path: `${request.url.pathname}${request.url.search}`,
        method: request.method,
        headers: request.headers,
        body: request.body,
        signal: both,
      });
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > this.limits.maxResponseBodyBytes) {
          response.body.destroy();
          return { error: `fetch: the response body is larger than ${this.limits.maxResponseBodyBytes / 1024 / 1024} MB`, retriable: false };
        }
        chunks.push(chunk);
      }
      const headers: Array<[string, string]> = [];
      for (const [name, value] of Object.entries(response.headers)) {
        if (value === undefined) continue;
        for (const one of Array.isArray(value) ? value : [value]) headers.push([name, one]);
      }
      return { status: response.statusCode, statusText: '', headers, body: Buffer.concat(chunks).toString('utf8'), url: request.url.href };
    } catch (error) {
      if (timeout.aborted) return { error: `fetch failed: timeout after ${this.limits.timeoutMs} ms`, retriable: true };
      return describeFailure(error);
    }
  }

  async destroy(): Promise<void> {
    await this.agent.destroy();
  }
}

function describeFailure(error: unknown): FetchAnswer {
  const chain: unknown[] = [];
  for (let current = error; current !== undefined && current !== null && chain.length < 8; current = (current as { cause?: unknown }).cause) chain.push(current);
  const refusal = chain.find((e): e is PrivateAddressError => e instanceof PrivateAddressError);
  if (refusal !== undefined) return { error: `fetch failed: ${refusal.message}`, retriable: false };
  const code = chain.map((e) => (e as { code?: unknown }).code).find((c): c is string => typeof c === 'string');
  const message = error instanceof Error ? error.message : String(error);
  if (code !== undefined && UNTRUSTED_CERTIFICATE.test(code)) return { error: `fetch failed: TLS certificate not trusted (${code})`, retriable: false };
  return { error: `fetch failed: ${code === undefined ? message : `${code}: ${message}`}`.slice(0, 500), retriable: true };
}

/**
 * The fetches of one handler call: counts them against the limit, records
 * each (method, URL, status or error, duration), and is closed when the
 * call ends, which aborts what is still in flight (its answer is never
 * delivered: the call is over).
 */
export class FetchSession {
  readonly records: FetchRecord[] = [];
  /** Texts of the retriable failures handed to the function (a throw of one of them is a network error: retried). */
  readonly retriableErrors = new Set<string>();
  private readonly controller = new AbortController();
  private closed = false;

  constructor(
    private readonly fetcher: FunctionFetcher,
    /** Ids unique among the fetches the isolate may be waiting for (those of every call in it). */
    private readonly nextId: () => number,
    private readonly settle: (id: string, answerJson: string) => void,
  ) {}

  /** The `startFetch` callback's work: `{"id":n}` once started, or `{"error":…}` for a request refused at once. */
  start(requestJson: unknown): string {
    if (this.closed) return JSON.stringify({ error: 'fetch is only available while a handler runs' });
    const limits = this.fetcher.limits;
    if (this.records.length >= limits.maxRequestsPerCall) {
      const error = `fetch: at most ${limits.maxRequestsPerCall} requests per call`;
      this.records.push({ method: '', url: '', error, durationMs: 0 });
      return JSON.stringify({ error });
    }
    const checked = checkRequest(requestJson, limits);
    if (typeof checked === 'string') {
      this.records.push({ method: '', url: '', error: checked, durationMs: 0 });
      return JSON.stringify({ error: checked });
    }
    if (checked.headers['user-agent'] === undefined) checked.headers['user-agent'] = limits.userAgent;
    const record: { method: string; url: string; status?: number; error?: string; durationMs: number } = { method: checked.method, url: checked.url.href, durationMs: 0 };
    this.records.push(record);
    const id = this.nextId();
    const started = performance.now();
    void this.fetcher.send(checked, this.controller.signal).then((answer) => {
      record.durationMs = Math.round(performance.now() - started);
      if ('error' in answer) {
        record.error = answer.error;
        if (answer.retriable) this.retriableErrors.add(answer.error);
      } else record.status = answer.status;
      if (this.closed) return;
      this.settle(String(id), JSON.stringify('error' in answer ? { error: answer.error } : answer));
    });
    return JSON.stringify({ id });
  }

  close(): void {
    this.closed = true;
    this.controller.abort();
  }
}

/** The request the isolate sent, checked: a string, or why it is refused. */
function checkRequest(requestJson: unknown, limits: FetchLimits): CheckedRequest | string {
  // JSON escapes at most sextuple a character (\u0000): a bound before parsing.
  if (typeof requestJson !== 'string' || requestJson.length > limits.maxRequestBodyBytes * 6 + MAX_HEADER_BYTES * 6 + MAX_URL_CHARS * 6) {
    return `fetch: the request is larger than ${limits.maxRequestBodyBytes / 1024 / 1024} MB`;
  }
  let raw: { method?: unknown; url?: unknown; headers?: unknown; body?: unknown };
  try {
    raw = JSON.parse(requestJson) as typeof raw;
  } catch {
    return 'fetch: the request could not be read';
  }
  const method = typeof raw.method === 'string' ? raw.method.toUpperCase() : '';
  if (!METHODS.has(method)) return `fetch: method must be one of ${[...METHODS].join(', ')}`;
  if (typeof raw.url !== 'string' || raw.url.length > MAX_URL_CHARS) return `fetch: the URL must be a string of at most ${MAX_URL_CHARS} characters`;
  let url: URL;
  try {
    url = new URL(raw.url);
  } catch {
    return 'fetch: invalid URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `fetch: only http and https URLs can be fetched, not ${url.protocol.slice(0, 20)}`;
  if (url.username !== '' || url.password !== '') return 'fetch: credentials in the URL are not sent; use an Authorization header';
  const headers: Record<string, string> = {};
  if (!Array.isArray(raw.headers) || raw.headers.length > MAX_HEADERS) return `fetch: at most ${MAX_HEADERS} headers`;
  let headerBytes = 0;
  for (const pair of raw.headers as unknown[]) {
    if (!Array.isArray(pair) || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') return 'fetch: headers must be pairs of strings';
    // Refused here, not left to undici: a request that cannot be sent is no network error to retry.
    if (!HEADER_NAME.test(pair[0])) return `fetch: invalid header name ${JSON.stringify(pair[0].slice(0, 100))}`;
    if (HEADER_VALUE_BREAK.test(pair[1])) return `fetch: invalid header value for ${pair[0]} (line breaks and NUL are not allowed)`;
    const name = pair[0].toLowerCase();
    headerBytes += name.length + pair[1].length;
    if (FORBIDDEN_HEADERS.has(name)) continue;
    headers[name] = pair[1];
  }
  if (headerBytes > MAX_HEADER_BYTES) return `fetch: the headers are larger than ${MAX_HEADER_BYTES / 1024} KB`;
  let body: string | undefined;
  if (raw.body !== null && raw.body !== undefined) {
    if (typeof raw.body !== 'string') return 'fetch: the body could not be read';
    if (Buffer.byteLength(raw.body) > limits.maxRequestBodyBytes) return `fetch: the request body is larger than ${limits.maxRequestBodyBytes / 1024 / 1024} MB`;
    body = raw.body;
  }
  return { method, url, headers, body };
}

const URL_PARTS = new Set(['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash']);

/**
 * The `parseUrl` callback: the WHATWG parse of `input` (against `base`),
 * with `part` set to `value` first when given; strings in, JSON text out.
 * Pure: touches nothing but its arguments.
 */
export function parseUrlJson(input: unknown, base: unknown, part: unknown, value: unknown): string {
  const text = (v: unknown): v is string => typeof v === 'string' && v.length <= MAX_URL_CHARS;
  if (!text(input) || (base !== undefined && !text(base))) return JSON.stringify({ error: 'Invalid URL' });
  let url: URL;
  try {
    url = base === undefined ? new URL(input) : new URL(input, base);
  } catch {
    return JSON.stringify({ error: `Invalid URL: ${input.slice(0, 200)}` });
  }
  if (part !== undefined) {
    if (typeof part !== 'string' || !URL_PARTS.has(part) || !text(value)) return JSON.stringify({ error: 'Invalid URL component' });
    try {
      (url as unknown as Record<string, string>)[part] = value;
    } catch {
      return JSON.stringify({ error: `Invalid URL: ${value.slice(0, 200)}` });
    }
  }
  const { href, origin, protocol, username, password, host, hostname, port, pathname, search, hash } = url;
  return JSON.stringify({ href, origin, protocol, username, password, host, hostname, port, pathname, search, hash });
}
