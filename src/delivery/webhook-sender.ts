import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';
import { type Verdict, verdictForStatus } from '../domain/delivery-decision.js';
import { parseRetryAfter } from '../domain/retry-policy.js';
import { PrivateAddressError, guardedLookup, refuseLiteral } from './address-guard.js';

export interface WebhookSenderOptions {
  readonly timeoutMs: number;
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
}

/** Response bodies are read (so the connection can be reused) up to this size, then dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;

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
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly options: WebhookSenderOptions) {
    this.agent = new Agent({
      connections: options.connectionsPerOrigin,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: {
        timeout: options.timeoutMs,
        rejectUnauthorized: true,
        ...(options.allowPrivateReceivers ? {} : { lookup: guardedLookup }),
      },
    });
  }

  /** Never rejects: failures are results. */
  async post(url: string, headers: Readonly<Record<string, string>>, body: string, stop: AbortSignal): Promise<PostResult> {
    const at = this.options.now();
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    const target = new URL(url);
    const refused = this.options.allowPrivateReceivers ? undefined : refuseLiteral(target.hostname);
    if (refused !== undefined) return this.failure(url, at, elapsed(), refused, false);

    // One controller and one timer per request: cheaper than AbortSignal.timeout plus AbortSignal.any.
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.options.timeoutMs);
    const onStop = (): void => controller.abort();
    stop.addEventListener('abort', onStop);
    try {
      const response = await this.agent.request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: 'POST',
        headers,
        body,
        signal: controller.signal,
      });
      // The answer is in; a body that fails to arrive does not change it.
      await response.body.dump({ limit: MAX_RESPONSE_BYTES }).catch(() => undefined);
      const statusCode = response.statusCode;
      const verdict = verdictForStatus(statusCode);
      const retryAfter = verdict === 'retriable' ? parseRetryAfter(firstHeader(response.headers['retry-after']), this.options.now()) : undefined;
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
      };
    } catch (error) {
      if (stop.aborted && !timedOut) {
        return { url, at, durationMs: elapsed(), error: 'stopped', verdict: 'retriable', summary: 'stopped', metric: 'error', health: 'neutral', aborted: true };
      }
      return this.failure(url, at, elapsed(), error, timedOut);
    } finally {
      clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
    }
  }

  /** Closes every connection, ending requests still in flight. */
  async destroy(): Promise<void> {
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
