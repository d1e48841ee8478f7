/**
 * The limits every sandboxed call runs under (transformations and function
 * destinations), as docs/transformations.md ("The sandbox") documents
 * them; the time and memory ones are settings (see {@link SandboxSettings}).
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

/** The limits an operator sets (`Config.sandbox`, from SWITCHYARD_TRANSFORM_TIMEOUT_MS, …_MEMORY_MB and …_TOTAL_MEMORY_MB). */
export interface SandboxSettings {
  readonly timeoutMs: number;
  readonly memoryMb: number;
  readonly totalMemoryMb: number;
}

/** What each of {@link SandboxSettings} may be set to: 1 ms to 60 s, 8 to 1,024 MB per isolate, 8 to 65,536 MB in all. */
export const SANDBOX_SETTING_BOUNDS: { readonly [K in keyof SandboxSettings]: readonly [min: number, max: number] } = Object.freeze({
  timeoutMs: [1, 60_000],
  memoryMb: [8, 1_024],
  totalMemoryMb: [8, 65_536],
});

/** The limits with the operator's time and memory settings. */
export function sandboxLimits(settings: SandboxSettings): SandboxLimits {
  return Object.freeze({ ...DEFAULT_SANDBOX_LIMITS, timeoutMs: settings.timeoutMs, memoryMb: settings.memoryMb, totalMemoryMb: settings.totalMemoryMb });
}
