import { readTransformOutput, type TransformOutcome } from '../domain/transformation-output.js';
import { CodeError, checkCode, type SandboxCode } from '../sandbox/sandbox.js';
import type { SandboxLimits } from '../sandbox/sandbox-limits.js';
import { SandboxPool } from '../sandbox/sandbox-pool.js';

/** One version of a transformation, as the runner needs it. */
export interface TransformationVersion {
  readonly id: string;
  readonly name: string;
  readonly version: number;
  readonly code: string;
}

/** What `metadata(event)` answers inside the transformation. */
export interface TransformMetadata {
  readonly sourceId: string;
  readonly sourceName: string;
  readonly messageId: string | undefined;
}

export interface TransformRun {
  readonly outcome: TransformOutcome;
  readonly logs: readonly string[];
  readonly durationMs: number;
  /** The call timed out or ran out of memory (its isolate was recreated). */
  readonly fault?: 'timeout' | 'memory' | undefined;
}

const ENTRY_POINTS = ['transformEvent', 'transformBatch'] as const;

/** RudderStack's code shape: an ES module exporting `transformEvent` and/or `transformBatch`. */
export function transformationProgram(code: string): SandboxCode {
  return { code, kind: 'module', filename: 'transformation.js', entryPoints: ENTRY_POINTS };
}

/** Refuses code that does not compile or exports neither function; rejects with a {@link CodeError}. */
export async function checkTransformationCode(code: string, limits: SandboxLimits): Promise<void> {
  await checkCode(transformationProgram(code), limits);
}

export { CodeError };

/**
 * Runs transformations, one isolate per version (pooled), one message per
 * call: `transformEvent(event, metadata)`, or when only `transformBatch` is
 * exported, `transformBatch([event], metadata)`.
 */
export class TransformationRunner {
  readonly pool: SandboxPool;

  constructor(readonly limits: SandboxLimits, maxIsolates?: number) {
    this.pool = new SandboxPool(limits, maxIsolates);
  }

  async run(transformation: TransformationVersion, eventJson: string, meta: TransformMetadata): Promise<TransformRun> {
    const sandbox = this.pool.get(`${transformation.id}@${transformation.version}`, () => transformationProgram(transformation.code));
    let names: string[];
    try {
      names = await sandbox.entryPoints();
    } catch (error) {
      return { outcome: { kind: 'error', error: error instanceof Error ? error.message : String(error) }, logs: [], durationMs: 0 };
    }
    const metaJson = JSON.stringify({ ...meta, transformationId: transformation.id, transformationVersion: transformation.version });
    const batch = !names.includes('transformEvent');
    const result = await sandbox.call(batch ? 'transformBatch' : 'transformEvent', batch ? `[[${eventJson}]]` : `[${eventJson}]`, { meta: metaJson });
    if (!result.ok) return { outcome: { kind: 'error', error: result.error }, logs: result.logs, durationMs: result.durationMs, fault: result.fault };
    if (batch && !Array.isArray(result.value) && result.value !== null && result.value !== undefined) {
      return { outcome: { kind: 'error', error: 'transformBatch must return an array' }, logs: result.logs, durationMs: result.durationMs };
    }
    return { outcome: readTransformOutput(result.value, this.limits.outputBytes, this.limits.maxOutputs), logs: result.logs, durationMs: result.durationMs };
  }

  dispose(): void {
    this.pool.dispose();
  }
}
