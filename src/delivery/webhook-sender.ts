import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher, buildConnector } from 'undici';
import { type Verdict, verdictForStatus } from '../domain/delivery-decision.js';
import { parseRetryAfter } from '../domain/retry-policy.js';
import { PrivateAddressError, guardedLookup, refuseLiteral } from './address-guard.js';
import { tolerateUnsolicitedContinue } from './unsolicited-continue.js';
import type { AttemptResponse } from '../store/store.js';
import { DeadlineQueue } from '../util/deadline-queue.js';

export interface WebhookSenderOptions {
  readonly timeoutMs: number;
  /** Aborted when the worker stops: POSTs in flight end at once, as `aborted` results. */
  readonly stop: AbortSignal;
  readonly allowPrivateReceivers: boolean;
  /** Keep-alive connections per origin. */
  readonly connectionsPerOrigin: number;
  readonly now: () => number;
}

/** How one POST ended. `aborted`: the worker is stopping; nothing is recorded for it. */
export interface PostResult {
  readonly url: string;
  readonly at: number;
  readonly durationMs: number;
  readonly statusCode?: number | undefined;
  readonly error?: string | undefined;
  readonly verdict: Verdict;
  readonly summary: string;
  readonly retryAfterMs?: number | undefined;
  /** Label of the attempts metric: 2xx, 3xx, 4xx, 5xx, timeout, error, refused. */
  readonly metric: string;
  /** Whether the origin's health is known from it: an answer, a timeout or a connection failure. */
  readonly health: 'success' | 'failure' | 'neutral';
  readonly aborted: boolean;
  /** The receiver's answer, for the attempt log, when it answered. */
  readonly response?: AttemptResponse | undefined;
}

/** Response bodies are read (so the connection can be reused) up to this size, then dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** How much of a response body the attempt log keeps; the rest is read and dropped, never buffered. */
export const RESPONSE_BODY_KEPT = 1024;

/** Longest header value kept in the attempt log. */
const HEADER_KEPT = 256;

/** TLS errors that mean the receiver's certificate cannot be trusted; retrying would not help. */
const UNTRUSTED_CERTIFICATE = /^(ERR_TLS_CERT_ALTNAME_INVALID|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE|CERT_UNTRUSTED|CERT_REJECTED)/;

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * POSTs webhook bodies with undici: one keep-alive pool per origin, TLS
 * verified, redirects never followed (undici follows none without its
 * redirect interceptor, which is not installed), every request bounded by
 * the delivery timeout from start to end of the response. Without
 * `allowPrivateReceivers`, connections go only to addresses that passed the
 * SSRF guard.
 *
 * Requests go through undici's dispatch API, not `request()`: no response
 * stream, AbortController or timer per POST. One timer serves every
 * deadline, and stopping aborts what is in flight through the handlers.
 * (Measured: these per-POST objects were about a fifth of the worker's CPU.)
 */
export class WebhookSender {
  private readonly agent: Agent;
  private readonly targets = new Map<string, Target>();
  /** In flight, oldest first: every POST has the same timeout; one past its deadline is aborted. */
  private readonly inFlight = new DeadlineQueue<PostHandler>((handler) => handler.abort('timeout'));

  constructor(private readonly options: WebhookSenderOptions) {
    const connect = buildConnector({
      timeout: options.timeoutMs,
      rejectUnauthorized: true,
      ...(options.allowPrivateReceivers ? {} : { lookup: guardedLookup }),
    });
    this.agent = new Agent({
      connections: options.connectionsPerOrigin,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: (connectOptions, callback) => {
        connect(connectOptions, (...result) => {
          const [, socket] = result;
          if (socket) tolerateUnsolicitedContinue(socket); // undici calls back with only the error when connecting fails
          callback(...result);
        });
      },
    });
    options.stop.addEventListener('abort', () => {
      for (const handler of this.inFlight.values()) handler.abort('stopped');
    }, { once: true });
  }

  /** Never rejects: failures are results. */
  async post(url: string, headers: Readonly<Record<string, string>>, body: string): Promise<PostResult> {
    const at = this.options.now();
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    const target = this.target(url);
    const refused = this.options.allowPrivateReceivers ? undefined : refuseLiteral(target.hostname);
    if (refused !== undefined) return this.failure(url, at, elapsed(), refused, false);
    if (this.options.stop.aborted) return stopped(url, at, elapsed());

    const handler = new PostHandler(started + this.options.timeoutMs);
    this.inFlight.add(handler);
    try {
      this.agent.dispatch({ origin: target.origin, path: target.path, method: 'POST', headers, body }, handler);
    } catch (error) {
      handler.onResponseError(undefined, error as Error);
    }
    const answer = await handler.settled;
    this.inFlight.delete(handler);
    if (answer.statusCode === undefined) {
      if (answer.endedBy === 'stopped') return stopped(url, at, elapsed());
      return this.failure(url, at, elapsed(), answer.error, answer.endedBy === 'timeout');
    }
    // The answer is in; a body cut short (too long, too slow) does not change it.
    const statusCode = answer.statusCode;
    const verdict = verdictForStatus(statusCode);
    const retryAfter = verdict === 'retriable' ? parseRetryAfter(firstHeader(answer.retryAfter), this.options.now()) : undefined;
    return {
      url,
      at,
      durationMs: elapsed(),
      statusCode,
      verdict,
      summary: `HTTP ${statusCode}`,
      retryAfterMs: retryAfter,
      metric: `${Math.floor(statusCode / 100)}xx`,
      health: verdict === 'retriable' ? 'failure' : 'success',
      aborted: false,
      response: answer.response,
    };
  }

  /** The origin of a receiver URL (parsed once per URL), for the per-origin limits and breakers. */
  originOf(url: string): string {
    return this.target(url).origin;
  }

  /** Origin and path of a receiver URL, parsed once per URL (receivers are few and reused). */
  private target(url: string): Target {
    let target = this.targets.get(url);
    if (target === undefined) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, hostname: parsed.hostname };
      if (this.targets.size >= MAX_CACHED_TARGETS) this.targets.clear();
      this.targets.set(url, target);
    }
    return target;
  }

  /** Closes every connection, ending requests still in flight. */
  async destroy(): Promise<void> {
    this.inFlight.clear();
    await this.agent.destroy();
  }

  private failure(url: string, at: number, durationMs: number, error: unknown, timedOut: boolean): PostResult {
    const base = { url, at, durationMs, aborted: false } as const;
    const codes = causeChain(error).map((e) => (e as { code?: unknown }).code);
    const code = codes.find((c): c is string => typeof c === 'string');
    const privateRefusal = causeChain(error).find((e): e is PrivateAddressError => e instanceof PrivateAddressError);
    if (privateRefusal !== undefined) {
      return { ...base, error: privateRefusal.message, verdict: 'final', summary: privateRefusal.message, metric: 'refused', health: 'neutral' };
    }
    if (timedOut || codes.some((c) => typeof c === 'string' && TIMEOUT_CODES.has(c))) {
      const text = `timeout after ${this.options.timeoutMs} ms`;
      return { ...base, error: text, verdict: 'retriable', summary: text, metric: 'timeout', health: 'failure' };
    }
    const message = error instanceof Error ? error.message : String(error);
    if (code !== undefined && UNTRUSTED_CERTIFICATE.test(code)) {
      const text = `TLS certificate not trusted (${code}): ${message}`;
      return { ...base, error: text, verdict: 'final', summary: text, metric: 'error', health: 'neutral' };
    }
    const text = code === undefined ? message : `${code}: ${message}`;
    return { ...base, error: text, verdict: 'retriable', summary: text, metric: 'error', health: 'failure' };
  }
}

interface Target {
  readonly origin: string;
  readonly path: string;
  readonly hostname: string;
}

const MAX_CACHED_TARGETS = 10_000;

function stopped(url: string, at: number, durationMs: number): PostResult {
  return { url, at, durationMs, error: 'stopped', verdict: 'retriable', summary: 'stopped', metric: 'error', health: 'neutral', aborted: true };
}

interface Answer {
  readonly statusCode?: number | undefined;
  readonly retryAfter?: string | string[] | undefined;
  readonly response?: AttemptResponse | undefined;
  readonly error?: unknown;
  /** Why it ended early: the deadline passed, or the worker stopped. */
  readonly endedBy?: 'timeout' | 'stopped' | undefined;
}

/**
 * Follows one POST through undici and settles once, with the first final
 * status (the body is read, up to MAX_RESPONSE_BYTES, so the connection can
 * be reused) or the error that ended it.
 */
class PostHandler implements Dispatcher.DispatchHandler {
  readonly settled: Promise<Answer>;
  private settle!: (answer: Answer) => void;
  private controller: Dispatcher.DispatchController | undefined;
  private statusCode: number | undefined;
  private retryAfter: string | string[] | undefined;
  private bytes = 0;
  private contentType: string | undefined;
  /** The first RESPONSE_BODY_KEPT bytes of the body: at most that is copied, whatever the body's size. */
  private readonly kept: Buffer[] = [];
  private endedBy: Answer['endedBy'];
  private done = false;

  constructor(readonly deadline: number) {
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  /** Ends the request (if it has not ended) for `reason`; an answer already in still counts. */
  abort(reason: 'timeout' | 'stopped'): void {
    if (this.done) return;
    this.endedBy = reason;
    if (this.statusCode !== undefined) this.finish();
    else this.finish(new Error(reason));
    this.controller?.abort(new Error(reason));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.done) controller.abort(new Error(this.endedBy ?? 'ended'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode < 200) return; // 1xx: the final answer is still to come
    this.statusCode = statusCode;
    this.retryAfter = headers['retry-after'];
    this.contentType = firstHeader(headers['content-type']);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.bytes < RESPONSE_BODY_KEPT) this.kept.push(Buffer.from(chunk.subarray(0, RESPONSE_BODY_KEPT - this.bytes)));
    this.bytes += chunk.length;
    // Past the limit the connection is not worth saving: drop it, keep the answer.
    if (this.bytes > MAX_RESPONSE_BYTES) {
      this.finish();
      controller.abort(new Error('response body too large'));
    }
  }

  onResponseEnd(): void {
    this.finish();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.finish(this.statusCode === undefined ? error : undefined);
  }

  private finish(error?: unknown): void {
    if (this.done) return;
    this.done = true;
    this.settle(error === undefined ? { statusCode: this.statusCode, retryAfter: this.retryAfter, response: this.response() } : { error, endedBy: this.endedBy });
  }

  private response(): AttemptResponse {
    const retryAfter = firstHeader(this.retryAfter);
    return {
      ...(this.contentType !== undefined && { contentType: this.contentType.slice(0, HEADER_KEPT) }),
      ...(retryAfter !== undefined && { retryAfter: retryAfter.slice(0, HEADER_KEPT) }),
      body: Buffer.concat(this.kept).toString('utf8'),
      ...(this.bytes > RESPONSE_BODY_KEPT && { bodyTruncated: true as const }),
    };
  }
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The error and its `cause`s, outermost first (bounded, in case of a cycle). */
function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current = error;
  while (current !== undefined && current !== null && chain.length < 8) {
    chain.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}
