import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DEFAULT_FETCH_BOUNDS, FunctionFetcher } from '../../src/functions/function-fetch.js';
import { FunctionRunner } from '../../src/functions/function-runner.js';
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from '../../src/sandbox/sandbox-limits.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { eventually } from '../helpers/switchyard.js';

/**
 * Adversarial tests of several calls of one function in flight in its one
 * isolate: what one call can do to the others, to the host, or after it
 * has ended. Each attack asserts the defence (removing it fails the test).
 */
const LIMITS: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 2_000, memoryMb: 16 };
const fetcher = new FunctionFetcher({ timeoutMs: 10_000, allowPrivateReceivers: true, userAgent: 'switchyard-test', ...DEFAULT_FETCH_BOUNDS });
const guarded = new FunctionFetcher({ timeoutMs: 10_000, allowPrivateReceivers: false, userAgent: 'switchyard-test', ...DEFAULT_FETCH_BOUNDS });
after(async () => {
  await fetcher.destroy();
  await guarded.destroy();
});

let nextId = 0;
const fn = (code: string) => ({ id: `fn_concurrency_escape_${++nextId}`, version: 1, code });
const track = (event: string, messageId = event) => JSON.stringify({ type: 'track', event, messageId, properties: {} });

describe('concurrent calls: escapes and abuse', () => {
  let receiver: TestReceiver;
  let runner: FunctionRunner | undefined;
  beforeEach(async () => {
    receiver = await startReceiver();
    receiver.reply = (request) => (request.path.includes('/hold') ? { hang: true } : { status: 200 });
  });
  afterEach(async () => {
    receiver.release();
    runner?.dispose();
    runner = undefined;
    await receiver.close();
  });

  it('Atomics.waitAsync is not offered: its timeout would abort the host process (checked in a child process)', async () => {
    // The attack runs in a child: without the defence it takes its process down.
    const runnerUrl = new URL('../../src/functions/function-runner.js', import.meta.url).href;
    const fetchUrl = new URL('../../src/functions/function-fetch.js', import.meta.url).href;
    const limitsUrl = new URL('../../src/sandbox/sandbox-limits.js', import.meta.url).href;
    const script = `
const { FunctionRunner } = await import(${JSON.stringify(runnerUrl)});
const { FunctionFetcher, DEFAULT_FETCH_BOUNDS } = await import(${JSON.stringify(fetchUrl)});
const { DEFAULT_SANDBOX_LIMITS } = await import(${JSON.stringify(limitsUrl)});
const fetcher = new FunctionFetcher({ timeoutMs: 1000, allowPrivateReceivers: false, userAgent: 't', ...DEFAULT_FETCH_BOUNDS });
const runner = new FunctionRunner({ ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 1000, memoryMb: 16 }, fetcher, undefined, 4);
const code = \`async function onTrack() {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const waited = Atomics.waitAsync(cell, 0, 0, 20);
  console.log('waitAsync', String(waited.async));
  if (waited.async) await waited.value;
}\`;
const result = await runner.run({ id: 'fn_wait', version: 1, code }, JSON.stringify({ type: 'track', event: 'x' }), {});
await new Promise((resolve) => setTimeout(resolve, 300));
console.log(JSON.stringify({ outcome: result.outcome, error: result.error }));
console.log('alive');
runner.dispose();
await new Promise((resolve) => setTimeout(resolve, 300));
await fetcher.destroy();
`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
    assert.equal(signal, null, `the host process died (${signal}): ${err.slice(0, 500)}`);
    assert.equal(code, 0, err.slice(0, 500));
    assert.match(out, /alive/);
    assert.match(out, /"outcome":"failed"/, out);
    assert.match(out, /waitAsync is not a function/, out);
  });

  it('FinalizationRegistry is not offered: its callbacks would run outside every call and its time limit, stalling the isolate', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event) {
  if (event.event !== 'Plant') { console.log('next ran'); return; }
  if (typeof FinalizationRegistry !== 'function') { console.log('no FinalizationRegistry'); return; }
  const registry = new FinalizationRegistry(() => { for (;;) {} });
  for (let i = 0; i < 20000; i++) registry.register({ filler: new Array(50) }, i);
  globalThis.registry = registry;
}`);
    const plant = await runner.run(code, track('Plant'), {});
    assert.equal(plant.outcome, 'delivered', JSON.stringify(plant));
    // Without the defence the cleanup task spins once the garbage is collected: the next call times out.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const next = await runner.run(code, track('Next'), {});
    assert.equal(next.outcome, 'delivered', JSON.stringify(next));
    assert.deepEqual(next.logs, ['next ran']);
    assert.deepEqual(plant.logs, ['no FinalizationRegistry']);
  });

  it('a loop of refused fetches does not grow the attempt log without end', async () => {
    // Time to spare for 5,000 fetches on a loaded machine.
    runner = new FunctionRunner({ ...LIMITS, timeoutMs: 20_000 }, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event, settings) {
  const answers = [];
  for (let i = 0; i < 5000; i++) answers.push(fetch(settings.url + '/flood/' + i).then(() => 'ok', (e) => e.message));
  const all = await Promise.all(answers);
  console.log(all.filter((a) => a === 'ok').length, 'ok', all.filter((a) => /at most 10 requests per call/.test(a)).length, 'refused');
}`);
    const result = await runner.run(code, track('Flood'), { url: receiver.url });
    assert.equal(result.outcome, 'delivered', JSON.stringify(result).slice(0, 500));
    assert.deepEqual(result.logs, ['10 ok 4990 refused']);
    assert.ok(result.fetches.length <= 20, `${result.fetches.length} fetch records for one call`);
    assert.equal(result.fetches.filter((f) => f.status === 200).length, 10);
    assert.equal(receiver.requests.filter((r) => r.path.includes('/flood/')).length, 10);
  });

  it('a closure stashed by one call and run from another counts against the live call: never more than 10 fetches per call in flight', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
async function onTrack(event, settings) {
  if (event.event === 'Stash') {
    globalThis.burst = () => Promise.all(Array.from({ length: 15 }, (_, i) => fetch(settings.url + '/burst/' + i).then(() => 'ok', (e) => e.message)));
    await fetch(settings.url + '/hold/stash');
    return;
  }
  const mine = await Promise.all(Array.from({ length: 5 }, (_, i) => fetch(settings.url + '/own/' + i).then(() => 'ok', (e) => e.message)));
  const stolen = await globalThis.burst();
  console.log(mine.filter((a) => a === 'ok').length + stolen.filter((a) => a === 'ok').length, 'ok');
}`);
    const settings = { url: receiver.url };
    const stash = runner.run(code, track('Stash'), settings);
    await eventually(() => receiver.hanging() === 1 || undefined, 5_000, 'the stashing call waiting on its fetch');
    const user = await runner.run(code, track('Use'), settings);
    receiver.release();
    const stashed = await stash;
    assert.equal(user.outcome, 'delivered', JSON.stringify(user));
    assert.deepEqual(user.logs, ['10 ok']);
    assert.equal(user.fetches.filter((f) => f.status === 200).length, 10);
    assert.deepEqual(stashed.fetches.map((f) => f.url), [`${receiver.url}/hold/stash`], 'the stashing call was charged for the other call');
    assert.equal(receiver.requests.filter((r) => /\/(own|burst)\//.test(r.path)).length, 10);
  });

  it('every concurrent fetch goes through the private-address guard', async () => {
    runner = new FunctionRunner(LIMITS, guarded, undefined, 8);
    const code = fn(`
async function onTrack(event, settings) {
  const res = await fetch(settings.targets[Number(event.event)]).then((r) => 'status ' + r.status, (e) => e.message);
  console.log(res);
}`);
    const port = new URL(receiver.url).port;
    const targets = [receiver.url, `http://localhost:${port}/x`, 'http://169.254.169.254/latest/meta-data/', 'http://[::1]/', `http://0x7f000001:${port}/`, 'http://10.0.0.1/', `http://127.1:${port}/`, 'http://[::ffff:127.0.0.1]/'];
    const results = await Promise.all(targets.map((_, i) => runner!.run(code, track(String(i), `m${i}`), { targets })));
    for (const [i, result] of results.entries()) {
      assert.equal(result.outcome, 'delivered', JSON.stringify(result));
      assert.doesNotMatch(result.logs[0] ?? '', /^status/, `${targets[i]} was reached: ${JSON.stringify(result)}`);
      assert.equal(result.fetches.length, 1);
      assert.ok(result.fetches[0]!.error !== undefined, JSON.stringify(result.fetches[0]));
    }
    assert.equal(receiver.requests.length, 0);
  });

  it('a call that blocks its isolate fails the calls awaiting beside it as retriable timeouts; the next call runs in a fresh isolate', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
    const code = fn(`
let calls = 0;
async function onTrack(event, settings) {
  calls++;
  if (event.event === 'Spin') { await fetch(settings.url + '/quick'); for (;;) {} }
  const res = await fetch(settings.url + '/' + event.event);
  console.log(event.event, 'call', calls, res.status);
}`);
    const settings = { url: receiver.url };
    const waiting = runner.run(code, track('hold'), settings);
    await eventually(() => receiver.hanging() === 1 || undefined, 5_000, 'a call waiting on its fetch');
    const spin = runner.run(code, track('Spin'), settings);
    await eventually(() => receiver.requests.some((r) => r.path.endsWith('/quick')) || undefined, 5_000, 'the spinning call past its fetch');
    receiver.release();
    const [spun, beside] = await Promise.all([spin, waiting]);
    assert.equal(spun.outcome, 'retry');
    assert.equal(spun.errorType, 'Timeout');
    // Its answer came while the isolate spun: it could not run, and its own time ran out.
    assert.equal(beside.outcome, 'retry', JSON.stringify(beside));
    assert.equal(beside.errorType, 'Timeout');
    const next = await runner.run(code, track('next'), settings);
    assert.equal(next.outcome, 'delivered', JSON.stringify(next));
    assert.deepEqual(next.logs, ['next call 1 200']);
  });

  it('a promise that never settles holds its turn only until its time runs out', async () => {
    runner = new FunctionRunner(LIMITS, fetcher, undefined, 1);
    const code = fn(`async function onTrack(event) { if (event.event === 'Hang') await new Promise(() => {}); console.log('ran', event.event); }`);
    const hang = runner.run(code, track('Hang'), {});
    const next = runner.run(code, track('Next'), {});
    const [hung, ran] = await Promise.all([hang, next]);
    assert.equal(hung.errorType, 'Timeout');
    assert.equal(ran.outcome, 'delivered', JSON.stringify(ran));
    assert.deepEqual(ran.logs, ['ran Next']);
  });

  it(
    'a promise shared by two calls (a cached token) keeps each call\'s later fetches and logs its own',
    {
      todo:
        'known limit: a continuation runs under the call whose answer settled it, so the second call\'s fetch is charged to, logged in and aborted with the first call; the second times out',
    },
    async () => {
      runner = new FunctionRunner(LIMITS, fetcher, undefined, 4);
      const code = fn(`
let token;
async function onTrack(event, settings) {
  token ??= fetch(settings.url + '/token').then((r) => r.status);
  await token;
  const res = await fetch(settings.url + (event.messageId === 'b' ? '/slow/b' : '/fast/a'));
  console.log('done', event.messageId, res.status);
}`);
      receiver.reply = (request) => (request.path.includes('/slow') ? { status: 200, delayMs: 300 } : { status: 200 });
      const settings = { url: receiver.url };
      const [a, b] = await Promise.all([runner.run(code, track('x', 'a'), settings), runner.run(code, track('x', 'b'), settings)]);
      assert.deepEqual(a.logs, ['done a 200']);
      assert.deepEqual(a.fetches.map((f) => new URL(f.url).pathname), ['/hook/token', '/hook/fast/a']);
      assert.equal(b.outcome, 'delivered', JSON.stringify(b));
      assert.deepEqual(b.logs, ['done b 200']);
    },
  );

  it('SWITCHYARD_FUNCTION_CONCURRENCY out of bounds or not a whole number is refused at start, naming the variable', () => {
    for (const value of ['0', '-1', '257', '1e9', 'abc', '1.5', 'NaN']) {
      assert.throws(
        () => loadConfig({}, { SWITCHYARD_FUNCTION_CONCURRENCY: value }),
        (error: unknown) => error instanceof ConfigError && /SWITCHYARD_FUNCTION_CONCURRENCY/.test(error.message) && /1 to 256/.test(error.message),
        value,
      );
    }
    assert.equal(loadConfig({}, { SWITCHYARD_FUNCTION_CONCURRENCY: '256' }).functionConcurrency, 256);
    assert.equal(loadConfig({}, {}).functionConcurrency, 64);
    // Empty is unset, as for every setting.
    assert.equal(loadConfig({}, { SWITCHYARD_FUNCTION_CONCURRENCY: '' }).functionConcurrency, 64);
  });
});
