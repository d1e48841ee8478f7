import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from '../../src/sandbox/sandbox-limits.js';
import { CodeError, checkTransformationCode, TransformationRunner, type TransformationVersion } from '../../src/transformations/transformation-runner.js';

/** Short limits so the hostile cases end quickly; the defaults are those docs/transformations.md documents. */
const LIMITS: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 400, memoryMb: 16 };
const META = { sourceId: 'src_1', sourceName: 'Web', messageId: 'm-1' };
const runner = new TransformationRunner(LIMITS);
after(() => runner.dispose());

let nextId = 0;
function version(code: string): TransformationVersion {
  nextId++;
  return { id: `tr_${nextId}`, name: `t${nextId}`, version: 1, code };
}
function bodiesOf(run: { outcome: unknown }): readonly string[] {
  return (run.outcome as { bodies: readonly string[] }).bodies;
}
const EVENT = JSON.stringify({ type: 'track', event: 'Order Completed', messageId: 'm-1', properties: { plan: 'pro' } });

describe('the transformation sandbox', () => {
  it('reshapes, drops and splits, with metadata and logs', async () => {
    const t = version(`export function transformEvent(event, metadata) {
      const meta = metadata(event);
      log('plan is', event.properties.plan, { n: 1 });
      if (event.event === 'Drop Me') return null;
      if (event.event === 'Split Me') return [{ n: 1 }, { n: 2 }];
      event.properties.plan = event.properties.plan.toUpperCase();
      event.context = meta;
      return event;
    }`);
    const run = await runner.run(t, EVENT, META);
    assert.equal(run.outcome.kind, 'output');
    const body = JSON.parse(bodiesOf(run)[0]!);
    assert.equal(body.properties.plan, 'PRO');
    assert.deepEqual(body.context, { ...META, transformationId: t.id, transformationVersion: 1 });
    assert.deepEqual(run.logs, ['plan is pro {"n":1}']);
    assert.deepEqual((await runner.run(t, JSON.stringify({ event: 'Drop Me', properties: {} }), META)).outcome, { kind: 'dropped' });
    assert.deepEqual((await runner.run(t, JSON.stringify({ event: 'Split Me', properties: {} }), META)).outcome, { kind: 'output', bodies: ['{"n":1}', '{"n":2}'] });
  });

  it('runs transformBatch when it is the only export, and an async transformEvent', async () => {
    const batch = version('export function transformBatch(events, metadata) { return events.filter((e) => e.event !== "x"); }');
    assert.deepEqual((await runner.run(batch, '{"event":"x"}', META)).outcome, { kind: 'dropped' });
    assert.deepEqual((await runner.run(batch, '{"event":"y"}', META)).outcome, { kind: 'output', bodies: ['{"event":"y"}'] });
    const asyncOne = version('export async function transformEvent(e) { await null; return { ...e, ok: true }; }');
    assert.deepEqual((await runner.run(asyncOne, '{"a":1}', META)).outcome, { kind: 'output', bodies: ['{"a":1,"ok":true}'] });
  });

  it('fails a throw (also of a non-Error), a non-object, a non-JSON or too large result', async () => {
    const cases: Array<[string, RegExp]> = [
      ['throw new Error("bad plan")', /^bad plan \(line 1, column \d+\)$/],
      ['throw 42', /^42$/],
      ['throw { toString() { return "weird" } }', /./],
      ['return 5', /not an object \(a number\)/],
      ['return "text"', /not an object/],
      ['return [e, 1]', /element 1 of the result is not an object/],
      ['const a = {}; a.self = a; return a', /not JSON/],
      ['return { n: 10n }', /not JSON/],
      ['return { big: "x".repeat(40000) }', /larger than 32 KB/],
    ];
    for (const [body, expected] of cases) {
      const run = await runner.run(version(`export function transformEvent(e) { ${body} }`), EVENT, META);
      assert.equal(run.outcome.kind, 'error', body);
      assert.match((run.outcome as { error: string }).error, expected, body);
    }
  });

  it('says where in the code an error was thrown, from the frames only, and only the two numbers', async () => {
    const errorOf = async (code: string): Promise<string> => {
      const run = await runner.run(version(code), '{"a":1}', META);
      assert.equal(run.outcome.kind, 'error', code);
      return (run.outcome as { error: string }).error;
    };
    // A runtime error two calls deep, after an await: the frame that threw.
    assert.equal(
      await errorOf('function helper(p) {\n  return p.missing.b;\n}\nexport async function transformEvent(e) {\n  await null;\n  return helper(e);\n}'),
      "Cannot read properties of undefined (reading 'b') (line 2, column 20)",
    );
    // Positions written into the message are not taken for the frame's.
    assert.equal(await errorOf('export function transformEvent(e) {\n\n  throw new Error("at x (transformation.js:9:9)");\n}'), 'at x (transformation.js:9:9) (line 3, column 9)');
    // A stack the code made unreadable, or huge, costs it the position only.
    assert.equal(await errorOf('export function transformEvent(e) { const err = new Error("m"); Object.defineProperty(err, "stack", { get() { throw 1; } }); throw err; }'), 'm');
    assert.equal(await errorOf('export function transformEvent(e) { const err = new Error("m"); err.stack = "x\\n    at a (transformation.js:".repeat(100000); throw err; }'), 'm');
    // A frame of another file whose name ends in the program's is not taken for one of its own.
    assert.equal(await errorOf('export function transformEvent(e) {\n  return eval("\\n\\nthrow new Error(\'x\')\\n//# sourceURL=my-transformation.js");\n}'), 'x (line 2, column 10)');
    // A throw of a non-Error has no stack to read.
    assert.equal(await errorOf('export function transformEvent(e) { throw "plain"; }'), 'plain');
    // What the position is worked out with was captured before the code ran:
    // replacing RegExp.prototype.exec or String.prototype.slice neither
    // chooses the text appended nor throws out of the dispatcher.
    const thrower = 'export function transformEvent(e) {\n  throw new Error("m");\n}';
    assert.equal(await errorOf(`RegExp.prototype.exec = function () { return ["", "any text", "at all"]; };\n${thrower}`), 'm (line 3, column 9)');
    assert.equal(await errorOf(`RegExp.prototype.exec = function () { throw new Error("timed out " + "x".repeat(100000)); };\n${thrower}`), 'm (line 3, column 9)');
    assert.equal(
      await errorOf('String.prototype.slice = function () { throw new Error("s"); };\nexport function transformEvent(e) {\n  const err = new Error("m");\n  err.stack = "x\\n    at a (transformation.js:7:7)" + " ".repeat(5000);\n  throw err;\n}'),
      'm (line 7, column 7)',
    );
  });

  it('bounds what code throws out of the dispatcher itself, and does not take it for a timeout', async () => {
    // A toJSON on Object.prototype makes the dispatcher's own answer throw.
    const run = await runner.run(version('export function transformEvent(e) {\n  Object.prototype.toJSON = function () { throw new Error("timed out " + "x".repeat(1000000)); };\n  throw new Error("m");\n}'), '{}', META);
    assert.equal(run.outcome.kind, 'error');
    assert.equal(run.fault, undefined, 'not a timeout');
    const error = (run.outcome as { error: string }).error;
    assert.equal(error, `timed out ${'x'.repeat(990)}…`);
  });

  it('times out an endless loop and a promise that never settles; the isolate is recreated and others go on', async () => {
    const loop = version(`let calls = 0;
      export function transformEvent(e) { calls++; if (e.loop) { for (;;) {} } return { calls }; }`);
    const hang = version('export async function transformEvent(e) { await new Promise(() => {}); }');
    const microtasks = version('export async function transformEvent(e) { for (;;) await null; }');
    const other = version('export function transformEvent(e) { return { ok: true }; }');
    assert.deepEqual((await runner.run(loop, '{}', META)).outcome, { kind: 'output', bodies: ['{"calls":1}'] });
    const [looped, otherRun] = await Promise.all([runner.run(loop, '{"loop":true}', META), runner.run(other, '{}', META)]);
    assert.equal(looped.fault, 'timeout');
    assert.match((looped.outcome as { error: string }).error, /timed out after 400 ms/);
    assert.deepEqual(otherRun.outcome, { kind: 'output', bodies: ['{"ok":true}'] });
    // A fresh isolate: its state starts again.
    assert.deepEqual((await runner.run(loop, '{}', META)).outcome, { kind: 'output', bodies: ['{"calls":1}'] });
    for (const t of [hang, microtasks]) {
      const run = await runner.run(t, '{}', META);
      assert.equal(run.fault, 'timeout');
    }
  });

  it('fails a memory bomb and recreates its isolate', async () => {
    const bomb = version(`export function transformEvent(e) {
      if (!e.bomb) return { fine: true };
      const hoard = []; for (;;) hoard.push(new Array(100000).fill(Math.random()));
    }`);
    const run = await runner.run(bomb, '{"bomb":true}', META);
    assert.equal(run.outcome.kind, 'error');
    assert.equal(run.fault, 'memory', JSON.stringify(run));
    assert.deepEqual((await runner.run(bomb, '{}', META)).outcome, { kind: 'output', bodies: ['{"fine":true}'] });
  });

  it('gives the code no way out: no process, require, import, host constructor', async () => {
    const probe = version(`export async function transformEvent(e) {
      const seen = {};
      seen.process = typeof process; seen.require = typeof require; seen.fetch = typeof fetch;
      seen.setTimeout = typeof setTimeout; seen.Buffer = typeof Buffer;
      try { seen.ctor = (function () { return this; })?.constructor('return typeof process')(); } catch (err) { seen.ctor = 'threw'; }
      try { seen.ctor2 = globalThis.constructor.constructor('return typeof process')(); } catch (err) { seen.ctor2 = 'threw'; }
      try { seen.logCtor = log.constructor('return typeof process')(); } catch (err) { seen.logCtor = 'threw'; }
      try { await import('node:fs'); seen.import = 'loaded'; } catch (err) { seen.import = 'refused'; }
      seen.globals = Object.getOwnPropertyNames(globalThis).filter((n) => !/^[A-Z]/.test(n)).sort().join(',');
      return seen;
    }`);
    const run = await runner.run(probe, '{}', META);
    assert.equal(run.outcome.kind, 'output', JSON.stringify(run));
    const seen = JSON.parse(bodiesOf(run)[0]!);
    assert.equal(seen.process, 'undefined');
    assert.equal(seen.require, 'undefined');
    assert.equal(seen.fetch, 'undefined');
    assert.equal(seen.setTimeout, 'undefined');
    assert.equal(seen.Buffer, 'undefined');
    assert.equal(seen.ctor, 'undefined');
    assert.equal(seen.ctor2, 'undefined');
    assert.equal(seen.logCtor, 'undefined');
    assert.equal(seen.import, 'refused');
    assert.doesNotMatch(seen.globals, /process|require|module|exports|__dirname/);
    await assert.rejects(checkTransformationCode('import fs from "fs"; export function transformEvent(e) { return e; }', LIMITS), /imports are not available/);
  });

  it('keeps state and prototype changes inside one isolate, never across transformations or into the host', async () => {
    const polluter = version(`let n = 0;
      export function transformEvent(e) { const seen = e.polluted ?? null; Object.prototype.polluted = 'yes'; globalThis.JSON = null; n++; return { n, seen }; }`);
    const clean = version('export function transformEvent(e) { return { polluted: ({}).polluted ?? null, count: globalThis.n ?? null }; }');
    assert.deepEqual((await runner.run(polluter, '{}', META)).outcome, { kind: 'output', bodies: ['{"n":1,"seen":null}'] });
    // The next message of the same one: its state is kept (allowed), its input inherits only inside the isolate.
    assert.deepEqual((await runner.run(polluter, '{}', META)).outcome, { kind: 'output', bodies: ['{"n":2,"seen":"yes"}'] });
    assert.deepEqual((await runner.run(clean, '{}', META)).outcome, { kind: 'output', bodies: ['{"polluted":null,"count":null}'] });
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });

  it('bounds the logged lines of a message', async () => {
    const chatty = version('export function transformEvent(e) { for (let i = 0; i < 1000; i++) log("line " + i + " " + "x".repeat(50)); return e; }');
    const run = await runner.run(chatty, '{}', META);
    const total = run.logs.reduce((sum, line) => sum + line.length, 0);
    assert.ok(total <= 4 * 1024 + 40, String(total));
    assert.match(run.logs.at(-1)!, /log limit reached/);
    // The bounds do not rest on what the code can replace: with String.prototype.slice
    // throwing, logging past the limit and a long error still work, bounded.
    const sabotage = 'String.prototype.slice = () => { throw new Error("no slice"); };';
    const logged = await runner.run(version(`export function transformEvent(e) { ${sabotage} log("y".repeat(10000)); return e; }`), '{}', META);
    assert.equal(logged.outcome.kind, 'output', JSON.stringify(logged.outcome));
    assert.match(logged.logs[0]!, /^y+ \[log limit reached\]$/);
    const thrown = await runner.run(version(`export function transformEvent(e) { ${sabotage} const err = new Error("z".repeat(5000)); err.name = "N".repeat(500); throw err; }`), '{}', META);
    assert.equal(thrown.outcome.kind, 'error');
    assert.match((thrown.outcome as { error: string }).error, /^z{1000}…/);
  });

  it('refuses code that does not compile with its line and column, and code exporting neither function', async () => {
    const error = await checkTransformationCode('export function transformEvent(e) {\n  return e +;\n}', LIMITS).then(
      () => assert.fail('compiled'),
      (err: unknown) => err,
    );
    assert.ok(error instanceof CodeError);
    assert.equal(error.line, 2);
    assert.equal(error.column, 13);
    await assert.rejects(checkTransformationCode('export function other() {}', LIMITS), /defines none of transformEvent, transformBatch/);
    // Written as a script, as Segment's functions are: the answer says what to add.
    await assert.rejects(checkTransformationCode('function transformEvent(event) { return event; }', LIMITS), /declares transformEvent but does not export it: write `export function transformEvent/);
    await assert.rejects(checkTransformationCode('const transformBatch = (events) => events;', LIMITS), /declares transformBatch but does not export it/);
    // Code that exports something is not told to export what it exports, nor misled by a comment.
    await assert.rejects(checkTransformationCode('export const transformEvent = 5;', LIMITS), /defines none of transformEvent, transformBatch/);
    await assert.rejects(checkTransformationCode('// function transformEvent\nexport function transformevent(e) { return e; }', LIMITS), /defines none of/);
    await assert.rejects(checkTransformationCode('for (;;) {}\nexport function transformEvent(e) { return e; }', LIMITS), /timed out|did not finish loading/);
    await assert.rejects(checkTransformationCode(`// ${'x'.repeat(300 * 1024)}`, LIMITS), /larger than 256 KB/);
    // A message thrown as the code loads is the code's to choose: looking
    // for a position in a long one held the host's thread for minutes, and
    // all of it was kept.
    const long = await checkTransformationCode('throw new Error("[".repeat(1000000) + "]");\nexport function transformEvent(e) { return e; }', LIMITS).then(
      () => assert.fail('loaded'),
      (err: unknown) => err,
    );
    assert.ok(long instanceof CodeError);
    assert.equal(long.message, `the code failed as it loaded: ${'['.repeat(1000)}…`);
  });
});

describe('the sandbox pool', () => {
  it('keeps no more isolates than the total memory budget holds, whatever the number of transformations', async () => {
    const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 2_000, memoryMb: 16, totalMemoryMb: 40 };
    const pool = new TransformationRunner(limits);
    try {
      for (let i = 0; i < 5; i++) {
        const run = await pool.run(version('export function transformEvent(e) { return e; }'), EVENT, META);
        assert.equal(bodiesOf(run).length, 1);
        assert.ok(pool.pool.size <= 2, `${pool.pool.size} isolates live with a budget for 2`);
      }
      assert.equal(pool.pool.size, 2);
    } finally {
      pool.dispose();
    }
  });
});
