import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type DeliveryRound, type SentResult, decideDelivery, verdictForStatus } from '../../src/domain/delivery-decision.js';
import { backoffDelay, parseRetryAfter, retryDelay } from '../../src/domain/retry-policy.js';
import { webhookBody, webhookPayload } from '../../src/domain/webhook-payload.js';
import { parseWebhookSettings } from '../../src/domain/webhook-settings.js';

const policy = { baseMs: 100, maxDelayMs: 1_000, windowMs: 10_000 };
const low = (): number => 0;
const high = (): number => 0.999999;

describe('retry policy', () => {
  it('doubles from the base with equal jitter, capped', () => {
    assert.equal(backoffDelay(policy, 1, low), 50);
    assert.equal(backoffDelay(policy, 1, high), 100);
    assert.equal(backoffDelay(policy, 2, low), 100);
    assert.equal(backoffDelay(policy, 3, high), 400);
    assert.equal(backoffDelay(policy, 10, low), 500);
    assert.equal(backoffDelay(policy, 10, high), 1_000);
    assert.equal(backoffDelay(policy, 5_000, high), 1_000, 'no overflow on long runs');
  });

  it('waits for Retry-After when it is longer, never past the cap', () => {
    assert.equal(retryDelay(policy, 1, 700, low), 700);
    assert.equal(retryDelay(policy, 1, 10, low), 50);
    assert.equal(retryDelay(policy, 1, 60_000, low), 1_000);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2024-01-01T00:00:00Z');
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter(' 0 ', now), 0);
    assert.equal(parseRetryAfter('Mon, 01 Jan 2024 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Sun, 31 Dec 2023 00:00:00 GMT', now), 0, 'a past date means now');
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter('-5', now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });
});

describe('outcome of a round (the multi-receiver rule)', () => {
  const sent = (url: string, verdict: SentResult['verdict'], extra: Partial<SentResult> = {}): SentResult => ({ url, verdict, summary: verdict, ...extra });
  const round = (overrides: Partial<DeliveryRound>): DeliveryRound => ({
    now: 1_000, startedAt: 900, firstAttemptAt: undefined, previousRounds: 0, sent: [], held: [], ...overrides,
  });

  it('classifies answers: 2xx success; 5xx, 408, 429 retriable; other 4xx and 3xx final', () => {
    assert.deepEqual([200, 204, 299].map(verdictForStatus), ['success', 'success', 'success']);
    assert.deepEqual([500, 503, 599, 408, 429].map(verdictForStatus), Array(5).fill('retriable'));
    assert.deepEqual([301, 302, 307, 400, 401, 404, 410, 422].map(verdictForStatus), Array(8).fill('final'));
  });

  it('succeeds when any receiver accepted, whatever the others did', () => {
    assert.deepEqual(decideDelivery(round({ sent: [sent('a', 'retriable'), sent('b', 'success'), sent('c', 'final')] }), policy, low), { kind: 'succeeded' });
  });

  it('retries only the retriable receivers (and held ones), after the backoff', () => {
    const decision = decideDelivery(
      round({ sent: [sent('a', 'retriable'), sent('b', 'final')], held: [{ url: 'c', reason: 'busy', until: 1_100 }] }),
      policy,
      low,
    );
    assert.equal(decision.kind, 'retry');
    assert.deepEqual(decision.kind === 'retry' && decision.retryUrls, ['a', 'c']);
    assert.equal(decision.kind === 'retry' && decision.nextAttemptAt, 1_050);
  });

  it('fails at once when every failure is final', () => {
    const decision = decideDelivery(round({ sent: [sent('a', 'final', { summary: 'HTTP 404' })] }), policy, low);
    assert.deepEqual(decision, { kind: 'failed', lastError: 'a: HTTP 404' });
  });

  it('honours Retry-After and stops at the window: the last retry is when it closes', () => {
    const decision = decideDelivery(round({ firstAttemptAt: 0, now: 9_500, sent: [sent('a', 'retriable', { retryAfterMs: 800 })] }), policy, low);
    assert.equal(decision.kind === 'retry' && decision.nextAttemptAt, 10_000);
    const early = decideDelivery(round({ firstAttemptAt: 0, now: 5_000, sent: [sent('a', 'retriable', { retryAfterMs: 800 })] }), policy, low);
    assert.equal(early.kind === 'retry' && early.nextAttemptAt, 5_800);
    const closed = decideDelivery(round({ firstAttemptAt: 0, now: 10_000, sent: [sent('a', 'retriable', { summary: 'HTTP 500' })] }), policy, low);
    assert.equal(closed.kind, 'failed');
    assert.match(closed.kind === 'failed' ? closed.lastError : '', /retry window closed; last round: a: HTTP 500/);
  });

  it('opens the window at the first attempt of this round when there was none', () => {
    const decision = decideDelivery(round({ startedAt: 900, now: 20_000, sent: [sent('a', 'retriable')] }), policy, low);
    assert.equal(decision.kind, 'failed', 'window measured from startedAt 900');
  });

  it('defers a round that sent nothing, counting no attempt', () => {
    const held = [{ url: 'a', reason: 'circuit-open' as const, until: 5_000 }, { url: 'b', reason: 'busy' as const, until: 3_000 }];
    assert.deepEqual(decideDelivery(round({ held }), policy, low), { kind: 'deferred', nextAttemptAt: 3_000 });
  });

  it('keeps never-attempted deliveries behind an open circuit, and fails attempted ones when their window closes', () => {
    const held = [{ url: 'a', reason: 'circuit-open' as const, until: 50_000 }];
    assert.equal(decideDelivery(round({ now: 1e9, held }), policy, low).kind, 'deferred');
    assert.deepEqual(decideDelivery(round({ now: 2_000, firstAttemptAt: 0, held }), policy, low), { kind: 'deferred', nextAttemptAt: 10_000 });
    assert.equal(decideDelivery(round({ now: 10_000, firstAttemptAt: 0, held }), policy, low).kind, 'failed');
    const busy = [{ url: 'a', reason: 'busy' as const, until: 10_500 }];
    assert.equal(decideDelivery(round({ now: 10_000, firstAttemptAt: 0, held: busy }), policy, low).kind, 'deferred', 'busy is not the receiver failing');
  });
});

describe('webhook payload', () => {
  it('adds version 1 first, replacing a client version, and is stable under parse and re-stringify', () => {
    const body = webhookBody(JSON.stringify({ type: 'track', userId: 'u', event: 'E', version: 7, properties: { n: 1.5, s: 'é\u2028' } }))!;
    assert.ok(body.startsWith('{"version":1,'));
    assert.equal(JSON.parse(body).version, 1);
    assert.equal(JSON.stringify(JSON.parse(body)), body);
  });

  it('fills the fields each type always has', () => {
    assert.deepEqual(webhookPayload({ type: 'track', anonymousId: 'a', event: 'E' }), { version: 1, type: 'track', anonymousId: 'a', event: 'E', userId: null, properties: {} });
    assert.deepEqual(webhookPayload({ type: 'identify', userId: 'u' }), { version: 1, type: 'identify', userId: 'u', traits: {} });
    assert.deepEqual(webhookPayload({ type: 'group', userId: 'u', groupId: 'g' }), { version: 1, type: 'group', userId: 'u', groupId: 'g', traits: {} });
    assert.deepEqual(webhookPayload({ type: 'screen', userId: 'u' }), { version: 1, type: 'screen', userId: 'u', name: null, context: {} });
    assert.deepEqual(webhookPayload({ type: 'alias', previousId: 'p', anonymousId: 'a' }), {
      version: 1, type: 'alias', previousId: 'p', anonymousId: 'a', userId: null, 'Previous ID': 'p', 'User ID': null,
    });
  });

  it('takes page properties from context.page only where the call has none', () => {
    const payload = webhookPayload({ type: 'page', userId: 'u', properties: { title: 'Mine', url: null }, context: { page: { title: 'Ctx', url: 'https://x/', path: '/' } } });
    assert.deepEqual(payload['properties'], { title: 'Mine', url: 'https://x/', path: '/' });
    assert.deepEqual(webhookPayload({ type: 'page', userId: 'u' })['properties'], {});
  });

  it('sends delete messages without a version', () => {
    const payload = webhookPayload({ type: 'delete', userId: 'u', timestamp: '2024-01-01T00:00:00.000Z', version: 1 });
    assert.deepEqual(payload, { type: 'delete', userId: 'u', timestamp: '2024-01-01T00:00:00.000Z' });
  });

  it('has nothing to send for a stored body that is not an object', () => {
    assert.equal(webhookBody('null'), undefined);
    assert.equal(webhookBody('[1]'), undefined);
    assert.equal(webhookBody('{'), undefined);
  });
});

describe('webhook settings', () => {
  it('normalizes URLs and treats an empty secret as none', () => {
    const parsed = parseWebhookSettings({ webhooks: [{ url: 'HTTPS://Example.COM:443/a b' }], sharedSecret: '' });
    assert.deepEqual(parsed, { ok: true, settings: { webhooks: [{ url: 'https://example.com/a%20b', headers: {} }] } });
  });

  it('refuses __proto__ as a header name and unknown fields', () => {
    const proto = JSON.parse('{"webhooks":[{"url":"https://e.com/","headers":{"__proto__":"x"}}]}') as unknown;
    assert.equal(parseWebhookSettings(proto).ok, false);
    assert.equal(parseWebhookSettings({ webhooks: [{ url: 'https://e.com/', method: 'PUT' }] }).ok, false);
    assert.equal(parseWebhookSettings({ webhooks: [{ url: 'https://e.com/' }], extra: 1 }).ok, false);
  });
});
