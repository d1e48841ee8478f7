import { compare, readPath } from '../../src/domain/conditions.js';
import {
  type AudienceCondition,
  type ComputationSpec,
  type ComputedTraitDefinition,
  type EngageMessage,
  type Outputs,
  type WindowedEvent,
  bucketSizeFor,
  parseAudienceDefinition,
  parseComputedTraitDefinition,
  parseWithin,
} from '../../src/domain/engage/index.js';

/**
 * A naive Engage: keeps every message and recomputes every output from all
 * of them. Windows follow the documented bucket rule (an event at t counts
 * while now < (floor(t/B) + 1)·B + W) unless `exactWindows`, where an event
 * counts while t > now − W.
 */
export function naiveOutputs(specs: readonly ComputationSpec[], messages: readonly EngageMessage[], now: number, exactWindows = false): Outputs {
  const outputs: Outputs = {};
  const traitsByKey = new Map<string, unknown>();
  for (const spec of specs.filter((s) => s.kind === 'trait')) {
    const value = traitValue(parseComputedTraitDefinition(spec.definition), messages, now, exactWindows);
    outputs[spec.id] = value;
    traitsByKey.set(spec.key, value);
  }
  const profileTraits = naiveTraits(messages);
  const audiences = specs.filter((s) => s.kind === 'audience');
  const audiencesByKey = new Map<string, boolean>();
  const memo = new Map<string, boolean>();
  const member = (spec: ComputationSpec): boolean => {
    const known = memo.get(spec.id);
    if (known !== undefined) return known;
    const test = (condition: AudienceCondition): boolean => {
      if ('performed' in condition) return compare(matching(condition.performed, messages, now, exactWindows).length, condition.performed.count.op, condition.performed.count.value);
      if ('notPerformed' in condition) return matching(condition.notPerformed, messages, now, exactWindows).length === 0;
      if ('trait' in condition) return compare(readPath(profileTraits, condition.trait.key), condition.trait.op, condition.trait.value);
      if ('computedTrait' in condition) return compare(traitsByKey.get(condition.computedTrait.key), condition.computedTrait.op, condition.computedTrait.value);
      if ('inAudience' in condition) return member(audiences.find((a) => a.key === condition.inAudience)!);
      if ('notInAudience' in condition) return !member(audiences.find((a) => a.key === condition.notInAudience)!);
      if ('and' in condition) return condition.and.every(test);
      if ('or' in condition) return condition.or.some(test);
      return !test(condition.not);
    };
    const result = test(parseAudienceDefinition(spec.definition));
    memo.set(spec.id, result);
    return result;
  };
  for (const spec of audiences) {
    outputs[spec.id] = member(spec);
    audiencesByKey.set(spec.key, outputs[spec.id] as boolean);
  }
  return outputs;
}

/** Identify traits, newest message winning per key; equal timestamps: the larger JSON text. */
export function naiveTraits(messages: readonly EngageMessage[]): Record<string, unknown> {
  const traits: Record<string, unknown> = {};
  const times: Record<string, number> = {};
  for (const message of messages) {
    if (message.type !== 'identify' || !message.traits) continue;
    for (const [key, value] of Object.entries(message.traits)) {
      if (value === undefined) continue;
      const time = times[key];
      if (time === undefined || time < message.timestamp || (time === message.timestamp && JSON.stringify(traits[key]) < JSON.stringify(value))) {
        traits[key] = value;
        times[key] = message.timestamp;
      }
    }
  }
  return traits;
}

function matching(event: WindowedEvent, messages: readonly EngageMessage[], now: number, exact: boolean): EngageMessage[] {
  const windowMs = event.within === undefined ? undefined : parseWithin(event.within, 'within');
  return messages.filter((message) => {
    if (typeof event.event === 'string' ? message.type !== 'track' || message.event !== event.event : message.type !== event.event.type) return false;
    const source = message.type === 'identify' || message.type === 'group' ? message.traits : message.properties;
    if (!(event.where ?? []).every((c) => compare(readPath(source, c.property), c.op, c.value))) return false;
    if (windowMs === undefined) return true;
    if (exact) return message.timestamp > now - windowMs;
    const bucketMs = bucketSizeFor(windowMs);
    return (Math.floor(message.timestamp / bucketMs) + 1) * bucketMs + windowMs > now;
  });
}

function traitValue(definition: ComputedTraitDefinition, messages: readonly EngageMessage[], now: number, exact: boolean): unknown {
  const events = matching(definition, messages, now, exact);
  // Counts and sums have no value until a first matching event, in or out of the window.
  const everMatched = matching({ event: definition.event, where: definition.where ?? [] }, messages, now, exact).length > 0;
  if (definition.type === 'event_counter') return everMatched ? events.length : undefined;
  const property = definition.property;
  const valued = events.map((m) => ({ t: m.timestamp, value: readPath(m.type === 'identify' || m.type === 'group' ? m.traits : m.properties, property) }));
  const numbers = valued.map((v) => v.value).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  const scalars = valued.map((v) => v.value).filter((v) => (typeof v === 'string' && v.length <= 1_000) || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)));
  switch (definition.type) {
    case 'aggregation':
      if (numbers.length === 0) return definition.fn === 'sum' && everMatched ? 0 : undefined;
      if (definition.fn === 'sum') return numbers.reduce((a, b) => a + b, 0);
      if (definition.fn === 'avg') return numbers.reduce((a, b) => a + b, 0) / numbers.length;
      return definition.fn === 'min' ? Math.min(...numbers) : Math.max(...numbers);
    case 'first':
    case 'last': {
      const kept = valued.filter((v) => v.value !== undefined && v.value !== null && JSON.stringify(v.value).length <= 1_000);
      if (kept.length === 0) return undefined;
      kept.sort((a, b) => a.t - b.t || (JSON.stringify(a.value) < JSON.stringify(b.value) ? -1 : JSON.stringify(a.value) > JSON.stringify(b.value) ? 1 : 0));
      return definition.type === 'first' ? kept[0]!.value : kept[kept.length - 1]!.value;
    }
    case 'most_frequent': {
      const counts = new Map<string, number>();
      for (const value of scalars) counts.set(JSON.stringify(value), (counts.get(JSON.stringify(value)) ?? 0) + 1);
      const best = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0];
      return best === undefined ? undefined : JSON.parse(best[0]);
    }
    case 'unique_list':
    case 'unique_list_count': {
      const distinct = new Map(scalars.map((v) => [JSON.stringify(v), v]));
      if (definition.type === 'unique_list_count') return everMatched ? distinct.size : undefined;
      if (distinct.size === 0) return undefined;
      const rank = (v: unknown) => (typeof v === 'number' ? 0 : typeof v === 'string' ? 1 : 2);
      return [...distinct.values()].sort((a, b) => rank(a) - rank(b) || (typeof a === 'number' ? a - (b as number) : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0));
    }
  }
}
