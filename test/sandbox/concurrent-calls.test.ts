import assert from 'node:assert/strict';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { DEFAULT_FETCH_BOUNDS, FunctionFetcher } from '../../src/functions/function-fetch.js';
import { type FunctionCallResult, FunctionRunner } from '../../src/functions/function-runner.js';
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from '../../src/sandbox/sandbox-limits.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { eventually } from '../helpers/switchyard.js';

/**
 * Several calls of one function in flight in its one isolate at once (what
 * function destinations do while their handlers wait on `fetch`): each call
 * keeps its own logs, fetches, fetch budget and time limit, and a fault
 * fails only calls of that isolate.
 */
const LIMITS: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 3_000, memoryMb: 16 };
const fetcher = new FunctionFetcher({ timeoutMs: 10_000, allowPrivateReceivers: true, userAgent: 'switchyard-test', ...DEFAULT_FETCH_BOUNDS });
after(() => fetcher.destroy());

let nextId = 0;
const track = (event: string, messageId = event) => JSON.stringify({ type: 'track', event, messageId, properties: {} });

describe('concurrent calls in one isolate', () => {
  let receiver: TestReceiver;
  let runner: FunctionRunner;
  beforeEach(async () => {
    receiver = await startReceiver();
    // Requests to a path with /hold in it are answered only on release().
    receiver.reply = (request) => (request.path.includes('/hold') ? { hang: true } : { status: 200 });
  });
  afterEach(async () => {
    receiver.release();
    runner.dispose();
    await receiver.close();
  });
  const fn = (code: string) => ({ id: `fn_concurrent_${++nextId}`, version: 1, code });

  it('keeps the logs and fetches of two calls in flight apart', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event, settings) {
  console.log('start', event.messageId);
  const first = await fetch(settings.url + '/' + event.event + '?m=' + event.messageId);
  console.log('first', first.status, 'for', event.messageId);
  const second = await fetch(settings.url + '/then?m=' + event.messageId);
  console.log('second', second.status, 'for', event.messageId);
}`);
    const settings = { url: receiver.url };
    const held = runner.run(code, track('hold', 'a'), settings);
    await eventually(() => receiver.hanging() === 1 || undefined, 5_000, 'the first call waiting on its fetch');
    // The second call runs to its end while the first waits in the same isolate.
    const quick = await Promise.race([
      runner.run(code, track('quick', 'b'), settings),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 5_000)),
    ]);
    receiver.release();
    const slow = await held;
    assert.ok(quick !== undefined, 'the second call did not end while the first was in flight');
    assert.equal(quick.outcome, 'delivered', JSON.stringify(quick));
    assert.deepEqual(quick.logs, ['start b', 'first 200 for b', 'second 200 for b']);
    assert.deepEqual(quick.fetches.map((f) => f.url), [`${receiver.url}/quick?m=b`, `${receiver.url}/then?m=b`]);
    assert.equal(slow.outcome, 'delivered', JSON.stringify(slow));
    assert.deepEqual(slow.logs, ['start a', 'first 200 for a', 'second 200 for a']);
    assert.deepEqual(slow.fetches.map((f) => f.url), [`${receiver.url}/hold?m=a`, `${receiver.url}/then?m=a`]);
  });

  it('gives each call its own budget of 10 fetches', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 2);
    const code = fn(`
async function onTrack(event, settings) {
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => fetch(settings.url + '/hold/' + event.messageId + '/' + i).then((r) => r.status, (e) => e.message)));
  console.log(answers.join(','));
}`);
    const settings = { url: receiver.url };
    const calls = [runner.run(code, track('six', 'a'), settings), runner.run(code, track('six', 'b'), settings)];
    // Twelve requests in flight at once: two calls of six each, over the ten a single call may make.
    await receiver.waitFor(12, 5_000).finally(() => receiver.release());
    for (const result of await Promise.all(calls)) {
      assert.equal(result.outcome, 'delivered', JSON.stringify(result));
      assert.deepEqual(result.logs, ['200,200,200,200,200,200']);
      assert.equal(result.fetches.length, 6);
    }
  });

  it('runs at most `concurrency` calls at once; the others wait their turn', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 2);
    const code = fn(`async function onTrack(event, settings) { await fetch(settings.url + '/hold/' + event.messageId); }`);
    const settings = { url: receiver.url };
    const calls = ['a', 'b', 'c'].map((id) => runner.run(code, track('held', id), settings));
    await eventually(() => receiver.hanging() === 2 || undefined, 5_000, 'two calls waiting on their fetches');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(receiver.requests.length, 2, 'a third call started');
    receiver.release();
    const results = await Promise.all(calls);
    assert.deepEqual(results.map((r) => r.outcome), ['delivered', 'delivered', 'delivered']);
    assert.deepEqual(receiver.requests.map((r) => r.path).sort(), ['/hook/hold/a', '/hook/hold/b', '/hook/hold/c']);
  });

  it('a call that times out fails alone: the calls in flight beside it end normally, and the next call runs in a fresh isolate', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
let calls = 0;
async function onTrack(event, settings) {
  calls++;
  const mine = calls;
  if (event.event === 'Hang') { console.log('hanging'); await new Promise(() => {}); }
  const res = await fetch(settings.url + '/' + event.event);
  console.log(event.event, 'was call', mine, 'status', res.status);
}`);
    const settings = { url: receiver.url };
    const hang = runner.run(code, track('Hang'), settings);
    // Started well after the hang, so that its own time runs out well after the hang's.
    await new Promise((resolve) => setTimeout(resolve, LIMITS.timeoutMs / 2));
    const beside = runner.run(code, track('hold'), settings);
    await eventually(() => receiver.hanging() === 1 || undefined, 5_000, 'the call beside waiting on its fetch');
    const hung = await hang;
    assert.equal(hung.outcome, 'retry');
    assert.equal(hung.errorType, 'Timeout');
    assert.match(hung.error!, /timed out after 3000 ms/);
    receiver.release();
    const besideResult = await beside;
    assert.equal(besideResult.outcome, 'delivered', JSON.stringify(besideResult));
    assert.deepEqual(besideResult.logs, ['hold was call 2 status 200']);
    const next = await runner.run(code, track('next'), settings);
    assert.equal(next.outcome, 'delivered', JSON.stringify(next));
    assert.deepEqual(next.logs, ['next was call 1 status 200'], 'the next call ran in the isolate that had timed out');
  });

  it('a call stuck in a loop is stopped with its isolate once its time is up, not when the calls beside it run out of theirs', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
let calls = 0;
async function onTrack(event, settings) {
  calls++;
  const mine = calls;
  if (event.event === 'Spin') { await fetch(settings.url + '/quick'); for (;;) {} }
  const res = await fetch(settings.url + '/' + event.event);
  console.log(event.event, 'was call', mine, 'status', res.status);
}`);
    const settings = { url: receiver.url };
    const spin = runner.run(code, track('Spin'), settings);
    // Started well after the spin, so that its own time runs out well after the spin's.
    await new Promise((resolve) => setTimeout(resolve, LIMITS.timeoutMs / 2));
    const beside = runner.run(code, track('hold'), settings);
    const spun = await spin;
    assert.equal(spun.outcome, 'retry');
    assert.equal(spun.errorType, 'Timeout');
    assert.match(spun.error!, /timed out after 3000 ms/);
    const besideResult = await beside;
    // Its isolate's thread never came back to it: it is stopped with the isolate, as a timeout to retry, not at its own time.
    assert.equal(besideResult.outcome, 'retry', JSON.stringify(besideResult));
    assert.equal(besideResult.errorType, 'Timeout');
    assert.match(besideResult.error!, /another call in its isolate ran on past 3000 ms/);
    const next = await runner.run(code, track('next'), settings);
    assert.equal(next.outcome, 'delivered', JSON.stringify(next));
    assert.deepEqual(next.logs, ['next was call 1 status 200'], 'the next call ran in the stuck isolate');
  });

  it('a call out of time whose code computes a little longer does not take the calls beside it along', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event, settings) {
  if (event.event === 'Long') { const s = Date.now(); while (Date.now() - s < ${LIMITS.timeoutMs} + 200); return; }
  const res = await fetch(settings.url + '/' + event.event);
  console.log(event.event, res.status);
}`);
    const settings = { url: receiver.url };
    const long = runner.run(code, track('Long'), settings);
    await new Promise((resolve) => setTimeout(resolve, LIMITS.timeoutMs / 2));
    // Starts only once Long's computation lets go of the thread, 200 ms after Long's time is up: well within its own.
    const beside = runner.run(code, track('beside'), settings);
    const late = await long;
    assert.equal(late.outcome, 'retry');
    assert.match(late.error!, /timed out after 3000 ms/);
    const besideResult = await beside;
    assert.equal(besideResult.outcome, 'delivered', JSON.stringify(besideResult));
    assert.deepEqual(besideResult.logs, ['beside 200']);
  });

  it('an answer that comes after its call has ended is dropped, so code waiting on it never runs', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
let calls = 0;
async function onTrack(event, settings) {
  calls++;
  if (event.event === 'Orphan') {
    // Not awaited: its answer comes after the call has returned.
    fetch(settings.url + '/orphan').then(() => { for (;;) {} }, () => {});
    const s = Date.now(); while (Date.now() - s < 150);
    return;
  }
  const res = await fetch(settings.url + '/' + event.event);
  console.log(event.event, 'was call', calls, 'status', res.status);
}`);
    const settings = { url: receiver.url };
    const orphan = await runner.run(code, track('Orphan'), settings);
    assert.equal(orphan.outcome, 'delivered', JSON.stringify(orphan));
    const next = await runner.run(code, track('next'), settings);
    assert.equal(next.outcome, 'delivered', JSON.stringify(next));
    assert.deepEqual(next.logs, ['next was call 2 status 200'], 'the same isolate, free');
  });

  it('an isolate out of memory fails every call in it, retried since the cause is unknown; the next call works', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event, settings) {
  if (event.event === 'Hog') { const keep = []; for (;;) keep.push(new Array(100000).fill(Math.random())); }
  const res = await fetch(settings.url + '/' + event.event);
  console.log(event.event, res.status);
}`);
    const settings = { url: receiver.url };
    const waiting = runner.run(code, track('hold'), settings);
    await eventually(() => receiver.hanging() === 1 || undefined, 5_000, 'a call waiting on its fetch');
    const hog = await runner.run(code, track('Hog'), settings);
    const beside = await waiting;
    for (const result of [hog, beside] as FunctionCallResult[]) {
      assert.equal(result.outcome, 'retry', JSON.stringify(result));
      assert.match(result.error!, /ran out of memory \(16 MB\)/);
    }
    const next = await runner.run(code, track('next'), settings);
    assert.equal(next.outcome, 'delivered', JSON.stringify(next));
    assert.deepEqual(next.logs, ['next 200']);
    // Alone in its isolate, a call that runs out of memory fails as before.
    const alone = await runner.run(code, track('Hog'), settings);
    assert.equal(alone.outcome, 'failed', JSON.stringify(alone));
  });

  it('a fetch left running by a call that ended is aborted; a call in flight beside it keeps its own', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event, settings) {
  if (event.event === 'Leave') {
    globalThis.leftover = fetch(settings.url + '/hold/left').then((r) => 'resolved', (e) => 'rejected ' + e.message);
    return;
  }
  const res = await fetch(settings.url + '/hold/mine');
  console.log('mine', res.status, 'leftover', await Promise.race([globalThis.leftover, Promise.resolve('pending')]));
}`);
    const settings = { url: receiver.url };
    const mine = runner.run(code, track('Wait'), settings);
    await eventually(() => receiver.hanging() === 1 || undefined, 5_000, 'a call waiting on its fetch');
    const leave = await runner.run(code, track('Leave'), settings);
    assert.equal(leave.outcome, 'delivered');
    assert.deepEqual(leave.fetches.map((f) => f.url), [`${receiver.url}/hold/left`]);
    receiver.release();
    const result = await mine;
    assert.equal(result.outcome, 'delivered', JSON.stringify(result));
    assert.deepEqual(result.fetches.map((f) => f.url), [`${receiver.url}/hold/mine`], 'only its own fetch');
    // The leftover was aborted when its call ended: it never settles, in any call.
    assert.deepEqual(result.logs, ['mine 200 leftover pending']);
  });

  it('the budget of notices a call may send holds after a thousand calls, whatever an earlier call replaced (Object.create)', async () => {
    // fetch's counts of notices by call are emptied past 1,024 calls; were
    // the empty table made with a global looked up then, an earlier call
    // could have replaced it with one that never counts.
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 16);
    const code = fn(`
async function onTrack(event, settings) {
  if (event.event === 'Poison') {
    Object.create = () => new Proxy({}, { get: () => undefined, set: () => true, defineProperty: () => true });
    return;
  }
  if (event.event === 'One') { await fetch(settings.url + '/one'); return; }
  const states = [];
  for (let i = 0; i < 24; i++) {
    const state = { now: 'pending' };
    fetch(settings.url + '/many/' + i).then(() => (state.now = 'sent'), (e) => (state.now = e.message));
    states.push(state);
  }
  await null; await null; await null;
  // Each notice waits for the host's answer at the end of this entry: the pending ones are the notices sent.
  console.log(states.filter((s) => s.now === 'pending').length);
}`);
    const settings = { url: receiver.url };
    assert.equal((await runner.run(code, track('Poison'), settings)).outcome, 'delivered');
    for (let round = 0; round < 65; round++) {
      const results = await Promise.all(Array.from({ length: 16 }, (_, i) => runner.run(code, track('One', `one_${round}_${i}`), settings)));
      for (const result of results) assert.equal(result.outcome, 'delivered', JSON.stringify(result));
    }
    const many = await runner.run(code, track('Many'), settings);
    assert.deepEqual(many.logs, ['20'], JSON.stringify(many));
  });
});
