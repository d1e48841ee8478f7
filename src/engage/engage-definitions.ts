import { type ComputationSpec, DefinitionError, EngageModel, type Outputs, emptyProfileState } from '../domain/engage/index.js';
import type { ComputationRecord } from '../store/store.js';
import type { Definitions, SyncTargets } from './profile-set.js';

/**
 * The stored computations compiled for the evaluator: the model, the
 * records it compiled, and the outputs a profile without stored ones
 * stands for.
 */
export function compileDefinitions(
  computations: readonly ComputationRecord[],
  syncTargets: ReadonlyMap<string, SyncTargets>,
  now: number,
  onError: (error: unknown) => void,
): Definitions {
  const model = compileTolerantly(computations.map(toSpec), onError);
  const compiled = new Set(model.specs.map((s) => s.id));
  const byId = new Map(computations.filter((c) => compiled.has(c.id)).map((c) => [c.id, c]));
  const baseline = model.evaluate(emptyProfileState(), now);
  return { model, byId, baseline, unsent: unsentOutputs(baseline, byId), syncTargets };
}

/** What a profile with no stored outputs was last sent: the baseline, but in no audience. */
export function unsentOutputs(baseline: Outputs, byId: ReadonlyMap<string, ComputationRecord>): Outputs {
  const current: Outputs = { ...baseline };
  for (const [id, computation] of byId) if (computation.kind === 'audience') current[id] = false;
  return current;
}

/** Compiles every definition it can: one that no longer compiles (a computation it read was deleted) is left out and reported. */
function compileTolerantly(specs: ComputationSpec[], onError: (error: unknown) => void): EngageModel {
  try {
    return EngageModel.compile(specs);
  } catch (error) {
    if (!(error instanceof DefinitionError)) throw error;
  }
  const kept: ComputationSpec[] = [];
  for (const spec of specs) {
    try {
      EngageModel.compile([...kept, spec]);
      kept.push(spec);
    } catch (error) {
      onError(new Error(`computation ${spec.id} (${spec.key}) is not evaluated: ${(error as Error).message}`));
    }
  }
  return EngageModel.compile(kept);
}

function toSpec(c: ComputationRecord): ComputationSpec {
  return { id: c.id, kind: c.kind, key: c.key, definition: c.definition };
}
