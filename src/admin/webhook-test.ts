import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { guardedLookup, refuseLiteral } from '../delivery/address-guard.js';
import { signBody, standardWebhookHeaders } from '../delivery/signer.js';
import { webhookBody } from '../domain/webhook-payload.js';
import { parseWebhookSettings } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import type { Store } from '../store/store.js';

/** What one receiver answered to the test message. */
export interface TestAnswer {
  readonly url: string;
  readonly statusCode?: number;
  readonly error?: string;
  readonly durationMs: number;
  /** The start of the answer's body, as text. */
  readonly body?: string;
  readonly bodyTruncated?: boolean;
}

export interface WebhookTesterOptions {
  readonly allowPrivateReceivers: boolean;
  readonly userAgent: string;
  readonly timeoutMs: number;
  readonly now: () => number;
}

/** The answer's body is shown up to this many bytes; the rest is dropped unread. */
const MAX_SHOWN_BYTES = 2_048;
export const TEST_EVENT = 'Switchyard Test Message';

/**
 * "Send a test message": POSTs one `track` (event {@link TEST_EVENT}) to
 * every receiver of a source's Webhooks destination, signed and with the
 * headers real deliveries carry, and reports each answer. Nothing is stored
 * and nothing is retried; it goes even when the destination is disabled,
 * since checking a receiver before enabling it is the point.
 */
export class WebhookTester {
  private readonly agent: Agent;

  constructor(
    private readonly store: Store,
    private readonly options: WebhookTesterOptions,
  ) {
    this.agent = new Agent({
      connections: 1,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: {
        timeout: options.timeoutMs,
        rejectUnauthorized: true,
        ...(options.allowPrivateReceivers ? {} : { lookup: guardedLookup }),
      },
    });
  }

  async send(sourceId: string): Promise<{ answers: TestAnswer[] }> {
    if ((await this.store.getSource(sourceId)) === undefined) {
      throw new ApiError('not_found', `no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
    }
    const destination = await this.store.getDestination(sourceId, 'webhooks');
    const parsed = destination === undefined ? undefined : parseWebhookSettings(destination.settings);
    if (parsed === undefined || !parsed.ok || parsed.settings.webhooks.length === 0) {
      throw new ApiError('not_found', `source ${sourceId} has no Webhooks destination to test`);
    }
    const { settings } = parsed;
    const now = this.options.now();
    const messageId = `switchyard-test-${randomUUID()}`;
    const at = new Date(now).toISOString();
    const message = {
      type: 'track',
      event: TEST_EVENT,
      userId: 'switchyard-test',
      messageId,
      timestamp: at,
      sentAt: at,
      receivedAt: at,
      originalTimestamp: at,
      properties: { test: true },
      context: { library: { name: 'switchyard-console', version: '1' } },
    };
    const body = webhookBody(JSON.stringify(message))!;
    const headers: Record<string, string> = { 'user-agent': this.options.userAgent, 'content-type': 'application/json' };
    if (settings.sharedSecret !== undefined) headers['x-signature'] = signBody(body, settings.sharedSecret);
    if (settings.standardWebhooks !== undefined) Object.assign(headers, standardWebhookHeaders(settings.standardWebhooks, messageId, body, now));
    const answers = await Promise.all(settings.webhooks.map((receiver) => this.post(receiver.url, { ...headers, ...receiver.headers }, body)));
    return { answers };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  private async post(url: string, headers: Record<string, string>, body: string): Promise<TestAnswer> {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    const refused = this.options.allowPrivateReceivers ? undefined : refuseLiteral(new URL(url).hostname);
    if (refused !== undefined) return { url, error: refused.message, durationMs: 0 };
    try {
      const response = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      const { text, truncated } = await readStart(response.body);
      return { url, statusCode: response.statusCode, durationMs: elapsed(), body: text, ...(truncated && { bodyTruncated: true }) };
    } catch (error) {
      const cause = (error as { cause?: unknown }).cause;
      const detail = error instanceof Error ? error.message : String(error);
      const code = (cause as { code?: unknown } | undefined)?.code ?? (error as { code?: unknown }).code;
      return { url, error: typeof code === 'string' ? `${code}: ${detail}` : detail, durationMs: elapsed() };
    }
  }
}

async function readStart(stream: AsyncIterable<Buffer> & { destroy(): void }): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    chunks.push(chunk);
    size += chunk.length;
    if (size > MAX_SHOWN_BYTES) {
      stream.destroy();
      return { text: Buffer.concat(chunks).subarray(0, MAX_SHOWN_BYTES).toString('utf8'), truncated: true };
    }
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated: false };
}
