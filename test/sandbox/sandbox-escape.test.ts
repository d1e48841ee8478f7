import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from '../../src/sandbox/sandbox-limits.js';
import { TransformationRunner, type TransformationVersion } from '../../src/transformations/transformation-runner.js';

/** Regression tests from the sandbox review: each one an attack that got through. */
const LIMITS: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 2_000, memoryMb: 16 };
const META = { sourceId: 'src_1', sourceName: 'Web', messageId: 'm-1' };
const EVENT = JSON.stringify({ type: 'track', event: 'Order Completed', messageId: 'm-1', properties: {} });
const runner = new TransformationRunner(LIMITS);
after(() => runner.dispose());

let nextId = 0;
function version(code: string): TransformationVersion {
  nextId++;
  return { id: `tr_escape_${nextId}`, name: `t${nextId}`, version: 1, code };
}

describe('the sandbox under attack', () => {
  it('does not let WebAssembly memory bypass the isolate memory limit', async () => {
    // A 16 MB isolate reserving and touching 256 MB of wasm memory (outside V8's heap and isolated-vm's ArrayBuffer allocator).
    const t = version(`export function transformEvent(event) {
      const memory = new WebAssembly.Memory({ initial: 4096 });
      new Uint8Array(memory.buffer, 0, 1024).fill(1);
      globalThis.kept = memory;
      return { allocatedMb: memory.buffer.byteLength / 1048576 };
    }`);
    const run = await runner.run(t, EVENT, META);
    assert.equal(run.outcome.kind, 'error', `wasm memory was allocated: ${JSON.stringify(run.outcome)}`);
  });

  it('offers no way to run code later outside a call: no FinalizationRegistry, no Atomics.waitAsync (whose timeout aborted the host)', async () => {
    const t = version(`export function transformEvent(event) {
      return { registry: typeof FinalizationRegistry, waitAsync: typeof Atomics.waitAsync, wait: typeof Atomics.wait };
    }`);
    const run = await runner.run(t, EVENT, META);
    // Atomics.wait stays: it blocks the call's own thread, which the time limit ends.
    assert.deepEqual(run.outcome, { kind: 'output', bodies: ['{"registry":"undefined","waitAsync":"undefined","wait":"function"}'] });
  });

  it('bounds logs on the host, even when the code replaces Array.prototype.toJSON', async () => {
    const t = version(`export function transformEvent(event) {
      Array.prototype.toJSON = function () { return this.length === 1 ? Array.from({ length: 200 }, () => 'x'.repeat(4000)) : [...this]; };
      log('one line');
      return event;
    }`);
    const run = await runner.run(t, EVENT, META);
    const chars = run.logs.reduce((sum, line) => sum + line.length, 0);
    assert.ok(chars <= LIMITS.logBytes + 100, `logs were ${chars} characters`);
  });

  it('bounds the error text on the host, even when the code forges the dispatcher result', async () => {
    const t = version(`export function transformEvent(event) {
      Object.prototype.toJSON = function () { return 'logs' in this ? { error: 'E'.repeat(1000000), logs: [] } : this; };
      return event;
    }`);
    const run = await runner.run(t, EVENT, META);
    assert.equal(run.outcome.kind, 'error');
    assert.ok((run.outcome as { error: string }).error.length <= 1100, 'the error text is unbounded');
  });

  it('does not fail a call in flight when its isolate is evicted from the pool by other transformations', async () => {
    const small = new TransformationRunner(LIMITS, 1);
    try {
      const victim = small.run(version(`export function transformEvent(event) { const t = Date.now(); while (Date.now() - t < 300) {} return { ok: 1 }; }`), EVENT, META);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const other = await small.run(version(`export function transformEvent(event) { return { other: 1 }; }`), EVENT, META);
      assert.equal(other.outcome.kind, 'output');
      assert.deepEqual((await victim).outcome, { kind: 'output', bodies: ['{"ok":1}'] });
    } finally {
      small.dispose();
    }
  });
});
