/**
 * The limits every sandboxed call runs under (transformations now, function
 * destinations next), as docs/transformations.md ("The sandbox") documents
 * them; the time and memory ones can be changed with
 * SWITCHYARD_TRANSFORM_TIMEOUT_MS / SWITCHYARD_TRANSFORM_MEMORY_MB /
 * SWITCHYARD_TRANSFORM_TOTAL_MEMORY_MB.
 */
export interface SandboxLimits {
  /** Wall time of one call, awaited promises included. */
  readonly timeoutMs: number;
  /** Heap of one isolate (isolated-vm's `memoryLimit`, MB; at least 8). */
  readonly memoryMb: number;
  /** Size of the code (UTF-8 bytes). */
  readonly codeBytes: number;
  /** Compact JSON of one output message (UTF-8 bytes): the Tracking API's per-message limit. */
  readonly outputBytes: number;
  /** Most messages one call may return (a split). */
  readonly maxOutputs: number;
  /** Logged lines per call, in characters of text. */
  readonly logBytes: number;
  /**
   * Heap of all live isolates of one pool together (MB): the pool keeps at
   * most `totalMemoryMb / memoryMb` isolates, so many transformations cannot
   * add up to more host memory than this, whatever each one allocates.
   */
  readonly totalMemoryMb: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = Object.freeze({
  timeoutMs: 4_000,
  memoryMb: 128,
  codeBytes: 256 * 1024,
  outputBytes: 32 * 1024,
  maxOutputs: 100,
  logBytes: 4 * 1024,
  totalMemoryMb: 2_048,
});

/** The limits with the environment's overrides (bounded: 1 ms–60 s, 8–1024 MB per isolate, 8–65536 MB in all). */
export function sandboxLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): SandboxLimits {
  const read = (name: string, fallback: number, min: number, max: number): number => {
    const value = env[name];
    if (value === undefined || value === '') return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    return n;
  };
  return Object.freeze({
    ...DEFAULT_SANDBOX_LIMITS,
    timeoutMs: read('SWITCHYARD_TRANSFORM_TIMEOUT_MS', DEFAULT_SANDBOX_LIMITS.timeoutMs, 1, 60_000),
    memoryMb: read('SWITCHYARD_TRANSFORM_MEMORY_MB', DEFAULT_SANDBOX_LIMITS.memoryMb, 8, 1_024),
    totalMemoryMb: read('SWITCHYARD_TRANSFORM_TOTAL_MEMORY_MB', DEFAULT_SANDBOX_LIMITS.totalMemoryMb, 8, 65_536),
  });
}
