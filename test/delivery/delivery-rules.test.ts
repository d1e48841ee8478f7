import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CircuitBreaker } from '../../src/delivery/circuit-breaker.js';
import { OriginSlots } from '../../src/delivery/origin-slots.js';
import { signBody } from '../../src/delivery/signer.js';
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

  it('signs with hex HMAC-SHA1 of the exact body', () => {
    assert.equal(signBody('The quick brown fox jumps over the lazy dog', 'key'), 'de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9');
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

describe('circuit breaker', () => {
  const options = { failureThreshold: 3, openMs: 1_000, maxOpenMs: 4_000, probeHoldMs: 100, probeTimeoutMs: 10_000 };

  it('opens after N retriable failures in a row, lets one probe through when the time is up, and closes on success', () => {
    const breaker = new CircuitBreaker(options);
    const o = 'https://r.example';
    breaker.record(o, 'failure', false, 0);
    breaker.record(o, 'failure', false, 0);
    breaker.record(o, 'success', false, 0); // the run is broken
    breaker.record(o, 'failure', false, 0);
    breaker.record(o, 'failure', false, 0);
    assert.equal(breaker.stateOf(o), 'closed');
    breaker.record(o, 'failure', false, 10);
    assert.equal(breaker.stateOf(o), 'open');
    assert.deepEqual(breaker.admit(o, 500), { kind: 'hold', until: 1_010 });
    assert.deepEqual(breaker.admit(o, 1_010), { kind: 'allow', probe: true });
    assert.deepEqual(breaker.admit(o, 1_020), { kind: 'hold', until: 1_120 }, 'one probe at a time');
    breaker.record(o, 'failure', true, 1_050);
    assert.deepEqual(breaker.admit(o, 1_060), { kind: 'hold', until: 3_050 }, 'a failed probe doubles the open time');
    assert.deepEqual(breaker.admit(o, 3_050), { kind: 'allow', probe: true });
    breaker.record(o, 'success', true, 3_060);
    assert.equal(breaker.stateOf(o), 'closed');
    assert.deepEqual(breaker.admit(o, 3_070), { kind: 'allow', probe: false });
  });

  it('keeps origins apart, and ignores late failures of requests sent before it opened', () => {
    const breaker = new CircuitBreaker(options);
    for (let i = 0; i < 3; i++) breaker.record('https://dead', 'failure', false, 0);
    assert.equal(breaker.admit('https://alive', 1).kind, 'allow');
    breaker.record('https://dead', 'failure', false, 5);
    assert.deepEqual(breaker.admit('https://dead', 6), { kind: 'hold', until: 1_000 });
    breaker.record('https://dead', 'neutral', false, 7);
    assert.equal(breaker.stateOf('https://dead'), 'open');
  });
});

describe('per-origin in-flight limit', () => {
  const never = new AbortController().signal;

  it('hands slots out first come first served, and the freed slot to the longest waiter', async () => {
    const slots = new OriginSlots({ perOrigin: 2, waitMs: 60_000, maxQueueMs: 100, maxHoldMs: 5_000 });
    assert.equal(await slots.acquire('a', never), true);
    assert.equal(await slots.acquire('a', never), true);
    assert.equal(await slots.acquire('b', never), true, 'other origins are not affected');
    const order: string[] = [];
    const first = slots.acquire('a', never).then((granted) => order.push(`first:${granted}`));
    const second = slots.acquire('a', never).then((granted) => order.push(`second:${granted}`));
    slots.release('a', 5);
    await first;
    assert.deepEqual(order, ['first:true']);
    slots.release('a', 5);
    await second;
    assert.deepEqual(order, ['first:true', 'second:true']);
    assert.equal(slots.inFlight('a'), 2);
  });

  it("turns away at once what would queue longer than maxQueueMs at the origin's pace, past a full round of waiters", async () => {
    const slots = new OriginSlots({ perOrigin: 2, waitMs: 60_000, maxQueueMs: 100, maxHoldMs: 5_000 });
    const fill = async (origin: string, latencyMs: number): Promise<Array<Promise<boolean>>> => {
      assert.equal(await slots.acquire(origin, never), true);
      assert.equal(await slots.acquire(origin, never), true);
      slots.release(origin, latencyMs); // one answer sets the pace; its slot goes to nobody waiting
      assert.equal(await slots.acquire(origin, never), true);
      return [slots.acquire(origin, never), slots.acquire(origin, never)]; // a full round of waiters
    };
    // 90 ms an answer, 2 slots: a third waiter would wait 3/2 x 90 = 135 ms.
    const slowWaiters = await fill('slow', 90);
    assert.equal(await slots.acquire('slow', never), false, 'turned away without waiting');
    // 10 ms an answer: 15 ms, so it queues.
    const fastWaiters = await fill('fast', 10);
    let queued = false;
    const third = slots.acquire('fast', never).then((granted) => (queued = granted));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(queued, false, 'still waiting for a slot');
    for (let n = 0; n < 3; n++) slots.release('fast', 10);
    assert.equal(await third, true);
    for (let n = 0; n < 2; n++) slots.release('slow', 90);
    assert.deepEqual(await Promise.all([...slowWaiters, ...fastWaiters]), [true, true, true, true]);
  });

  it('turns a waiter away after waitMs or on stop, and holds later ones back longer', async () => {
    const slots = new OriginSlots({ perOrigin: 1, waitMs: 20, maxQueueMs: 100, maxHoldMs: 5_000 });
    assert.equal(await slots.acquire('a', never), true);
    const before = slots.holdUntil('a', 0, low);
    assert.equal(await slots.acquire('a', never), false, 'no slot came free');
    assert.ok(slots.holdUntil('a', 0, low) > before, 'the more turned away, the longer the hold');
    assert.ok(slots.holdUntil('a', 0, high) <= 5_000, 'bounded');
    const stop = new AbortController();
    const waiting = slots.acquire('a', stop.signal);
    stop.abort();
    assert.equal(await waiting, false);
    slots.release('a', 1);
    assert.equal(slots.inFlight('a'), 0, 'a slot given up by a waiter is not leaked');
  });
});
