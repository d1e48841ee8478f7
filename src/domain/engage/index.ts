/**
 * Engage, the pure part: definitions of computed traits and audiences, the
 * per-profile state that keeps only what those definitions need, and their
 * evaluation. No I/O; the runtime (src/engage) stores states and sends syncs.
 */
export {
  type AudienceDefinition,
  type AudienceCondition,
  type ComputedTraitDefinition,
  type EventSelector,
  type PropertyCondition,
  type WindowedEvent,
  DefinitionError,
  DEFINITION_LIMITS,
  keyFromName,
  parseAudienceDefinition,
  parseComputedTraitDefinition,
  parseKey,
  referencedKeys,
} from './definitions.js';
export { bucketSizeFor, parseWithin, WINDOW_BUCKETS } from './windows.js';
export {
  type EngageMessage,
  type ProfileState,
  emptyProfileState,
  mergeProfileStates,
  profileTraits,
  STATE_LIMITS,
} from './state.js';
export { type ComputationKind, type ComputationSpec, type Outputs, EngageModel, diffOutputs } from './model.js';
export { IDENTIFIER_LIMITS, IdentifierCounts, MAX_PROFILE_IDENTIFIERS, identifierType } from './identity-limits.js';
