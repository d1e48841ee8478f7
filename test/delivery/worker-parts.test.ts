import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CircuitBreaker } from '../../src/delivery/circuit-breaker.js';
import { OriginSlots } from '../../src/delivery/origin-slots.js';
import { signBody } from '../../src/delivery/signer.js';
import { DeadlineQueue } from '../../src/util/deadline-queue.js';

const low = (): number => 0;
const high = (): number => 0.999999;

describe('webhook signature', () => {
  it('signs with hex HMAC-SHA1 of the exact body', () => {
    assert.equal(signBody('The quick brown fox jumps over the lazy dog', 'key'), 'de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9');
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

  it('reports what it holds (bounded) and says when a closed circuit opens, not when a failed probe reopens it', () => {
    const opened: string[] = [];
    const breaker = new CircuitBreaker(options, (key) => opened.push(key));
    for (let i = 0; i < 2; i++) breaker.record('https://flaky', 'failure', false, 0);
    for (let i = 0; i < 3; i++) breaker.record('https://dead', 'failure', false, 0);
    for (let i = 0; i < 3; i++) breaker.record('function:fn_1', 'failure', false, 0);
    assert.deepEqual(opened, ['https://dead', 'function:fn_1']);
    assert.deepEqual(breaker.held(10), [
      { target: 'https://dead', state: 'open', until: 1_000 },
      { target: 'function:fn_1', state: 'open', until: 1_000 },
    ]);
    assert.deepEqual(breaker.heldCounts(), { receiver: 1, function: 1 }, 'a closed circuit with failures is not held');
    assert.equal(breaker.held(1).length, 1);
    assert.deepEqual(breaker.admit('https://dead', 1_000), { kind: 'allow', probe: true });
    assert.deepEqual(breaker.held(10)[0], { target: 'https://dead', state: 'half-open' });
    breaker.record('https://dead', 'failure', true, 1_001);
    assert.deepEqual(opened, ['https://dead', 'function:fn_1'], 'reopened by a failed probe: not counted again');
    breaker.record('https://dead', 'success', false, 1_002);
    breaker.record('function:fn_1', 'success', false, 1_002);
    assert.deepEqual(breaker.held(10), []);
    assert.deepEqual(breaker.heldCounts(), { receiver: 0, function: 0 });
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

describe('deadline queue (one timer for the requests in flight)', () => {
  it('ends the items past their deadline, oldest first, and keeps the others and the deleted ones out', async () => {
    const expired: string[] = [];
    const queue = new DeadlineQueue<{ name: string; deadline: number }>((item) => expired.push(item.name));
    const now = performance.now();
    const done = { name: 'done', deadline: now - 20 };
    queue.add({ name: 'first', deadline: now - 30 });
    queue.add(done);
    queue.add({ name: 'second', deadline: now - 10 });
    queue.add({ name: 'later', deadline: now + 600_000 });
    queue.delete(done);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(expired, ['first', 'second']);
    assert.deepEqual([...queue.values()].map((item) => item.name), ['later']);
    queue.clear();
    assert.deepEqual([...queue.values()], []);
  });
});
