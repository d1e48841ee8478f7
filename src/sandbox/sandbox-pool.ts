import { Sandbox, type SandboxCode, type SandboxOptions } from './sandbox.js';
import type { SandboxLimits } from './sandbox-limits.js';

/**
 * Sandboxes by program key (a transformation's `id@version`): one isolate
 * per program, created on first use and reused for every later call; the
 * least recently used is disposed when more than `maxIsolates` are live
 * (by default as many as fit in `limits.totalMemoryMb` at `limits.memoryMb`
 * each, at least one).
 * A version's code never changes, so a key always names the same code.
 * (A program whose call timed out may have two isolates for a while: the
 * retired one, until the calls already in it end within their time limit,
 * and its replacement.)
 */
export class SandboxPool {
  private readonly sandboxes = new Map<string, Sandbox>();
  private readonly maxIsolates: number;

  constructor(
    private readonly limits: SandboxLimits,
    maxIsolates?: number,
    private readonly options: SandboxOptions = {},
  ) {
    this.maxIsolates = maxIsolates ?? Math.max(1, Math.floor(limits.totalMemoryMb / limits.memoryMb));
  }

  get(key: string, program: () => SandboxCode): Sandbox {
    let sandbox = this.sandboxes.get(key);
    if (sandbox !== undefined) {
      // Map order is insertion order: re-inserting marks it most recent.
      this.sandboxes.delete(key);
      this.sandboxes.set(key, sandbox);
      return sandbox;
    }
    sandbox = new Sandbox(program(), this.limits, this.options);
    this.sandboxes.set(key, sandbox);
    while (this.sandboxes.size > this.maxIsolates) {
      const [oldestKey, oldest] = this.sandboxes.entries().next().value as [string, Sandbox];
      this.sandboxes.delete(oldestKey);
      oldest.dispose();
    }
    return sandbox;
  }

  /** Whether a sandbox for `key` is live. */
  has(key: string): boolean {
    return this.sandboxes.has(key);
  }

  /** Heap in use of each live program's isolates, in bytes, by program key. */
  async heapByKey(): Promise<Map<string, number>> {
    const entries = [...this.sandboxes.entries()];
    const bytes = await Promise.all(entries.map(([, sandbox]) => sandbox.heapBytes()));
    return new Map(entries.map(([key], i) => [key, bytes[i]!]));
  }

  /** Heap in use by program id (the key up to its last `@`: all versions of one transformation or function together). */
  async heapById(): Promise<Array<{ readonly id: string; readonly bytes: number }>> {
    return [...(await this.heapByKey())].map(([key, bytes]) => ({ id: key.includes('@') ? key.slice(0, key.lastIndexOf('@')) : key, bytes }));
  }

  /** Heap in use across the live isolates, in bytes. */
  async heapBytes(): Promise<number> {
    let total = 0;
    for (const bytes of (await this.heapByKey()).values()) total += bytes;
    return total;
  }

  get size(): number {
    return this.sandboxes.size;
  }

  dispose(): void {
    for (const sandbox of this.sandboxes.values()) sandbox.dispose();
    this.sandboxes.clear();
  }
}
