import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher, buildConnector } from 'undici';
import { PrivateAddressError, guardedLookup, refuseLiteral } from '../delivery/address-guard.js';
import type { FetchRecord } from '../store/store.js';
import { DeadlineQueue } from '../util/deadline-queue.js';

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
/** A request's JSON (method, URL, headers) past which it is refused unread: JSON escapes at most sextuple a character (\u0000). */
export const MAX_REQUEST_JSON_CHARS = MAX_HEADER_BYTES * 6 + MAX_URL_CHARS * 6 + 1024;
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
  | { readonly status: number; readonly statusText: string; readonly headers: Array<[string, string]>; readonly body: string }
  | FetchFailure;
type FetchFailure = { readonly error: string; readonly retriable: boolean };

/**
 * One undici agent for every function of a worker (one keep-alive pool per
 * origin). Requests go through undici's dispatch API, as the Webhooks
 * destination's do (see webhook-sender.ts): no stream, AbortController or
 * timer per request; one timer serves every deadline.
 */
export class FunctionFetcher {
  private readonly agent: Agent;
  /** In flight, oldest first: every request has the same timeout; one past its deadline is ended. */
  private readonly inFlight = new DeadlineQueue<FetchHandler>((handler) => handler.end('timeout'));

  constructor(readonly limits: FetchLimits) {
    const connect = buildConnector({
      timeout: limits.timeoutMs,
      rejectUnauthorized: true,
      ...(limits.allowPrivateReceivers ? {} : { lookup: guardedLookup }),
    });
    this.agent = new Agent({ connections: limits.connectionsPerOrigin ?? 16, headersTimeout: limits.timeoutMs, bodyTimeout: limits.timeoutMs, connect });
  }

  /**
   * Sends one checked request; `done` gets its answer exactly once (perhaps
   * before this returns, for a request refused at once). Returns the
   * request's handle, to end it early.
   */
  send(request: CheckedRequest, done: (answer: FetchAnswer) => void): FetchHandler {
    const handler = new FetchHandler(performance.now() + this.limits.timeoutMs, this.limits, (answer) => {
      this.inFlight.delete(handler);
      done(answer);
    });
    if (!this.limits.allowPrivateReceivers) {
      const refused = refuseLiteral(request.url.hostname);
      if (refused !== undefined) {
        handler.fail({ error: refused.message, retriable: false });
        return handler;
      }
    }
    this.inFlight.add(handler);
    try {
      this.agent.dispatch({ origin: request.url.origin, path: `${request.url.pathname}${request.url.search}`, method: request.method, headers: request.headers, body: request.body ?? null }, handler);
    } catch (error) {
      handler.onResponseError(undefined, error as Error);
    }
    return handler;
  }

  async destroy(): Promise<void> {
    this.inFlight.clear();
    await this.agent.destroy();
  }
}

/** Follows one request through undici and answers once: the response (its body bounded) or why it failed. */
class FetchHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private status: number | undefined;
  private statusText = '';
  private headers: Array<[string, string]> = [];
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  private done = false;

  get ended(): boolean {
    return this.done;
  }

  constructor(
    readonly deadline: number,
    private readonly limits: FetchLimits,
    private readonly answer: (answer: FetchAnswer) => void,
  ) {}

  /** Ends the request if it has not ended: at its deadline (a retriable failure), or because its call ended (answered to nobody). */
  end(reason: 'timeout' | 'ended'): void {
    if (this.done) return;
    this.fail(reason === 'timeout' ? { error: `fetch failed: timeout after ${this.limits.timeoutMs} ms`, retriable: true } : { error: 'fetch aborted: the call had ended', retriable: false });
    this.controller?.abort(new Error(`fetch ${reason}`));
  }

  fail(answer: FetchFailure): void {
    if (this.done) return;
    this.done = true;
    this.answer(answer);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.done) controller.abort(new Error('fetch ended'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    if (statusCode < 200) return; // 1xx: the final answer is still to come
    this.status = statusCode;
    this.statusText = statusMessage ?? '';
    const pairs: Array<[string, string]> = [];
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) pairs.push([name, one]);
    }
    this.headers = pairs;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.done) return;
    this.bytes += chunk.length;
    if (this.bytes > this.limits.maxResponseBodyBytes) {
      this.fail({ error: `fetch: the response body is larger than ${this.limits.maxResponseBodyBytes / 1024 / 1024} MB`, retriable: false });
      controller.abort(new Error('response body too large'));
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.done) return;
    if (this.status === undefined) {
      this.fail({ error: 'fetch failed: the connection ended without an answer', retriable: true });
      return;
    }
    this.done = true;
    this.answer({ status: this.status, statusText: this.statusText, headers: this.headers, body: Buffer.concat(this.chunks).toString('utf8') });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.fail(describeFailure(error));
  }
}

function describeFailure(error: unknown): FetchFailure {
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
 * each (method, URL, status or error, duration), answers each through the
 * call's `settle`, and is closed when the call ends, which ends what is
 * still in flight (its answer is never delivered: the call is over).
 */
export class FetchSession {
  readonly records: FetchRecord[] = [];
  /** Texts of the retriable failures handed to the function (a throw of one of them is a network error: retried). */
  readonly retriableErrors = new Set<string>();
  private readonly inFlight = new Set<FetchHandler>();
  private closed = false;

  constructor(
    private readonly fetcher: FunctionFetcher,
    private readonly settle: (id: string, answerJson: string) => void,
  ) {}

  /** The `startFetch` notice's work: fetch `id` of the call, started or refused at once, and answered either way. */
  start(id: number, requestJson: unknown, body: unknown): void {
    if (this.closed) return;
    const limits = this.fetcher.limits;
    const refuse = (error: string): void => {
      // Refusals cost the code nothing but a notice: a loop of them would
      // grow the call's attempt log without end. Kept up to twice the
      // budget; those after are answered, not recorded.
      if (this.records.length < limits.maxRequestsPerCall * 2) this.records.push({ method: '', url: '', error, durationMs: 0 });
      this.settle(String(id), JSON.stringify({ error }));
    };
    if (this.records.length >= limits.maxRequestsPerCall) return refuse(`fetch: at most ${limits.maxRequestsPerCall} requests per call`);
    let checked: CheckedRequest | string;
    try {
      checked = checkRequest(requestJson, body, limits);
    } catch {
      checked = 'fetch: the request could not be read';
    }
    if (typeof checked === 'string') return refuse(checked);
    if (checked.headers['user-agent'] === undefined) checked.headers['user-agent'] = limits.userAgent;
    const record: { method: string; url: string; status?: number; error?: string; durationMs: number } = { method: checked.method, url: checked.url.href, durationMs: 0 };
    this.records.push(record);
    const started = performance.now();
    // Answered before send returns when refused at once (a private address).
    let handler: FetchHandler | undefined = undefined;
    handler = this.fetcher.send(checked, (answer) => {
      if (handler !== undefined) this.inFlight.delete(handler);
      record.durationMs = Math.round(performance.now() - started);
      if ('error' in answer) {
        record.error = answer.error;
        if (answer.retriable) this.retriableErrors.add(answer.error);
      } else record.status = answer.status;
      if (this.closed) return;
      this.settle(String(id), JSON.stringify('error' in answer ? { error: answer.error } : { ...answer, url: record.url }));
    });
    if (!handler.ended) this.inFlight.add(handler);
  }

  /** The call has ended: what it left in flight is ended too, recorded as such and answered to nobody. */
  close(): void {
    this.closed = true;
    for (const handler of this.inFlight) handler.end('ended');
    this.inFlight.clear();
  }
}

/** The request the isolate sent (its method, URL and headers as JSON, its body beside), checked: a string, or why it is refused. */
function checkRequest(requestJson: unknown, rawBody: unknown, limits: FetchLimits): CheckedRequest | string {
  if (typeof requestJson !== 'string' || requestJson.length > MAX_REQUEST_JSON_CHARS) {
    return `fetch: the request's headers are larger than ${MAX_HEADER_BYTES / 1024} KB`;
  }
  let raw: { method?: unknown; url?: unknown; headers?: unknown };
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
  if (rawBody !== null && rawBody !== undefined) {
    if (typeof rawBody !== 'string') return 'fetch: the body could not be read';
    // UTF-8 takes at least a byte a character: the length bounds it before the bytes are counted.
    if (rawBody.length > limits.maxRequestBodyBytes || Buffer.byteLength(rawBody) > limits.maxRequestBodyBytes) {
      return `fetch: the request body is larger than ${limits.maxRequestBodyBytes / 1024 / 1024} MB`;
    }
    body = rawBody;
  }
  // The isolate's Request refuses it too, but user code can change what it checks with.
  if (body !== undefined && (method === 'GET' || method === 'HEAD')) return `fetch: a ${method} request cannot have a body`;
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
