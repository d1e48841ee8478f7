import type { AudienceDefinition, ComputedTraitDefinition } from './definitions.js';
import type { EngageMessage, ProfileState } from './state.js';

export type ComputationKind = 'trait' | 'audience';

/** A stored computed trait or audience, as the runtime loads it. */
export interface ComputationSpec {
  /** 'ct_…' or 'aud_…' */
  readonly id: string;
  readonly kind: ComputationKind;
  readonly key: string;
  /** the JSON as posted (already validated once) */
  readonly definition: unknown;
}

/** Value of every computation for a profile: audiences boolean, traits value or undefined (no value). */
export type Outputs = Record<string, unknown>;

export class EngageModel {
  private constructor(readonly specs: readonly ComputationSpec[]) {}

  /** Compiles the current definitions; throws DefinitionError on an unknown referenced key or a cycle. */
  static compile(specs: readonly ComputationSpec[]): EngageModel {
    return new EngageModel(specs);
  }

  /** Ids of computations whose accumulators this message can change (for event-driven work). */
  affectedBy(message: EngageMessage): readonly string[] {
    void message;
    return [];
  }

  /**
   * Applies one message: traits (identify) and accumulators. Returns the new state (may mutate
   * and return the given one). `only`: apply to these computation ids' accumulators only
   * (backfill of a new/changed definition over stored history; traits untouched).
   */
  apply(state: ProfileState, message: EngageMessage, only?: ReadonlySet<string>): ProfileState {
    void message;
    void only;
    return state;
  }

  /** Forgets the accumulator of a computation (definition changed/deleted). */
  reset(state: ProfileState, computationId: string): ProfileState {
    delete state.acc[computationId];
    return state;
  }

  /** Every output at time `now` (windows slide relative to now). Audiences in dependency order. */
  evaluate(state: ProfileState, now: number): Outputs {
    void state;
    void now;
    return {};
  }

  /** Earliest time > now at which some output may change without a new message (a window expiring); undefined if none. */
  nextExpiry(state: ProfileState, now: number): number | undefined {
    void state;
    void now;
    return undefined;
  }

  /** Drops what no window still needs (old buckets); call before storing. */
  prune(state: ProfileState, now: number): ProfileState {
    void now;
    return state;
  }
}

/** Changed outputs between two evaluations: [id, newValue] (audience false on leave; trait undefined→null when a value disappears). */
export function diffOutputs(before: Outputs, after: Outputs): Array<[id: string, value: unknown]> {
  void before;
  void after;
  return [];
}

export type { AudienceDefinition, ComputedTraitDefinition };
