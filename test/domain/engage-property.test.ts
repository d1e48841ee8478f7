import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ComputationSpec,
  type EngageMessage,
  EngageModel,
  type ProfileState,
  emptyProfileState,
  mergeProfileStates,
  parseWithin,
  profileTraits,
} from '../../src/domain/engage/index.js';
import { naiveOutputs, naiveTraits } from '../helpers/engage-oracle.js';
import { seededRandom as random } from '../helpers/seeded-random.js';

const SEED = Number(process.env['ENGAGE_SEED'] ?? 20261124);
const RUNS = Number(process.env['ENGAGE_RUNS'] ?? 60);

const EVENTS = ['Order Completed', 'Product Viewed', 'Signed Up'];
const WINDOWS = [undefined, undefined, '10s', '90s', '5m', '1h', '6h', '1d', '30d'];
const SKUS = ['a', 'b', 'c', 'd', 7, 11, true];
const START = Date.UTC(2026, 0, 1);
const SPAN = 3 * 24 * 3600_000;

class Generator {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }

  eventCondition(): Record<string, unknown> {
    const condition: Record<string, unknown> = { event: this.chance(0.8) ? this.pick(EVENTS) : { type: this.pick(['page', 'identify', 'track', 'screen', 'group'] as const) } };
    if (this.chance(0.3)) condition['where'] = [this.pick([{ property: 'revenue', op: '>=', value: 20 }, { property: 'product.sku', op: '=', value: 'a' }, { property: 'plan', op: 'exists' }, { property: 'sku', op: '!=', value: 'b' }])];
    const within = this.pick(WINDOWS);
    if (within !== undefined) condition['within'] = within;
    return condition;
  }

  traitDefinition(): Record<string, unknown> {
    const type = this.pick(['event_counter', 'aggregation', 'most_frequent', 'first', 'last', 'unique_list', 'unique_list_count']);
    const definition: Record<string, unknown> = { type, ...this.eventCondition() };
    if (type === 'aggregation') definition['fn'] = this.pick(['sum', 'avg', 'min', 'max']);
    if (type !== 'event_counter') definition['property'] = type === 'aggregation' ? 'revenue' : this.pick(['sku', 'product.sku', 'revenue', 'plan']);
    return definition;
  }

  audienceCondition(depth: number, audienceKeys: readonly string[], traitKeys: readonly string[]): unknown {
    const roll = this.int(depth > 2 ? 6 : 9);
    switch (roll) {
      case 0:
      case 1: {
        const performed: Record<string, unknown> = this.eventCondition();
        if (this.chance(0.5)) performed['count'] = { op: this.pick(['>=', '>', '=', '<', '!=']), value: this.int(4) };
        return { performed };
      }
      case 2:
        return { notPerformed: this.eventCondition() };
      case 3:
        return { trait: this.pick([{ key: 'plan', op: '=', value: 'pro' }, { key: 'age', op: '>', value: 30 }, { key: 'address.city', op: 'exists' }]) };
      case 4:
        if (traitKeys.length > 0) {
          const op = this.pick(['>=', '=', '!=', 'exists', 'contains']);
          return { computedTrait: op === 'exists' ? { key: this.pick(traitKeys), op } : { key: this.pick(traitKeys), op, value: this.pick([1, 2, 'a', 20]) } };
        }
        return { trait: { key: 'plan', op: 'exists' } };
      case 5:
        if (audienceKeys.length > 0) return this.chance(0.5) ? { inAudience: this.pick(audienceKeys) } : { notInAudience: this.pick(audienceKeys) };
        return { notPerformed: this.eventCondition() };
      case 6:
        return { and: [this.audienceCondition(depth + 1, audienceKeys, traitKeys), this.audienceCondition(depth + 1, audienceKeys, traitKeys)] };
      case 7:
        return { or: [this.audienceCondition(depth + 1, audienceKeys, traitKeys), this.audienceCondition(depth + 1, audienceKeys, traitKeys)] };
      default:
        return { not: this.audienceCondition(depth + 1, audienceKeys, traitKeys) };
    }
  }

  specs(): ComputationSpec[] {
    const specs: ComputationSpec[] = [];
    const traitKeys: string[] = [];
    const audienceKeys: string[] = [];
    const traits = 1 + this.int(6);
    for (let i = 0; i < traits; i++) {
      specs.push({ id: `ct_${i}`, kind: 'trait', key: `trait_${i}`, definition: this.traitDefinition() });
      traitKeys.push(`trait_${i}`);
    }
    const audiences = 1 + this.int(6);
    for (let i = 0; i < audiences; i++) {
      // Audiences only read earlier ones, so there is no cycle; listing them in reverse checks that compile orders them.
      specs.push({ id: `aud_${i}`, kind: 'audience', key: `audience_${i}`, definition: this.audienceCondition(0, audienceKeys, traitKeys) });
      audienceKeys.push(`audience_${i}`);
    }
    return specs.reverse();
  }

  /** Integer values only, so that sums are exact whatever the order of addition. */
  message(): EngageMessage {
    const timestamp = START + this.int(SPAN);
    const kind = this.int(10);
    if (kind < 2) {
      const traits: Record<string, unknown> = {};
      if (this.chance(0.7)) traits['plan'] = this.pick(['free', 'pro', 'team']);
      if (this.chance(0.5)) traits['age'] = 18 + this.int(40);
      if (this.chance(0.3)) traits['address'] = this.chance(0.5) ? { city: this.pick(['Oslo', 'Lyon']) } : null;
      if (this.chance(0.3)) traits['sku'] = this.pick(SKUS);
      return { type: 'identify', traits, timestamp };
    }
    if (kind < 3) {
      const roll = this.int(4);
      if (roll === 0) return { type: 'screen', properties: { sku: this.pick(SKUS) }, timestamp };
      if (roll === 1) return { type: 'group', traits: { plan: this.pick(['free', 'pro']), revenue: this.int(50) }, timestamp };
      return { type: 'page', properties: { sku: this.pick(SKUS), revenue: this.int(50) }, timestamp };
    }
    const properties: Record<string, unknown> = {};
    if (this.chance(0.8)) properties['revenue'] = this.chance(0.9) ? this.int(60) - 5 : 'n/a';
    if (this.chance(0.7)) properties['sku'] = this.pick(SKUS);
    if (this.chance(0.4)) properties['product'] = { sku: this.pick(SKUS) };
    return { type: 'track', event: this.pick(EVENTS), properties, timestamp };
  }

  /** A time at or after the newest message (windows assume time moves forward), often near a window's edge. */
  now(newest: number): number {
    const within = this.pick(WINDOWS.filter((w) => w !== undefined));
    const windowMs = parseWithin(within, 'within');
    return newest + this.pick([0, 1, this.int(1000), this.int(windowMs), windowMs - 1, windowMs, windowMs + this.int(windowMs / 16), this.int(SPAN)]);
  }
}

function clone(state: ProfileState): ProfileState {
  return JSON.parse(JSON.stringify(state)) as ProfileState;
}

describe('engage model against a naive oracle', () => {
  it(`matches a full recomputation after every message (${RUNS} seeded runs, seed ${SEED})`, () => {
    const generate = new Generator(random(SEED));
    let checks = 0;
    for (let run = 0; run < RUNS; run++) {
      const specs = generate.specs();
      const model = EngageModel.compile(specs);
      let state = emptyProfileState();
      const log: EngageMessage[] = [];
      let newest = -Infinity;
      const count = 20 + generate.int(60);
      for (let i = 0; i < count; i++) {
        const message = generate.message();
        log.push(message);
        newest = Math.max(newest, message.timestamp);
        // Stored state is JSON: go through it as the runtime does.
        state = clone(model.apply(state, message));
        const now = generate.now(newest);
        const context = `run ${run} message ${i} now ${now}\n${JSON.stringify(specs)}`;
        const outputs = model.evaluate(state, now);
        assert.deepStrictEqual(outputs, naiveOutputs(specs, log, now), context);
        assert.deepStrictEqual(profileTraits(state), naiveTraits(log), context);
        checks++;

        // Nothing changes before nextExpiry; pruning at `now` changes nothing from `now` on.
        const expiry = model.nextExpiry(state, now);
        if (expiry === undefined) assert.deepStrictEqual(model.evaluate(state, now + 10 * 365 * 86400_000), outputs, context);
        else {
          assert.ok(expiry > now, context);
          assert.deepStrictEqual(model.evaluate(state, expiry - 1), outputs, context);
          assert.deepStrictEqual(naiveOutputs(specs, log, expiry - 1), outputs, context);
          // At the expiry itself, something has left its window: the model agrees with the oracle on the boundary.
          assert.deepStrictEqual(model.evaluate(state, expiry), naiveOutputs(specs, log, expiry), context);
        }
        const later = now + generate.int(2 * 86400_000);
        const pruned = model.prune(clone(state), now);
        assert.deepStrictEqual(model.evaluate(pruned, later), model.evaluate(state, later), context);
      }
    }
    assert.ok(checks > RUNS * 20);
  });

  it('never counts less than the exact window, nor more than the window plus one bucket', () => {
    const generate = new Generator(random(SEED + 1));
    for (let run = 0; run < 200; run++) {
      const within = generate.pick(WINDOWS.filter((w) => w !== undefined));
      const windowMs = parseWithin(within, 'within');
      const specs: ComputationSpec[] = [{ id: 'ct_n', kind: 'trait', key: 'n', definition: { type: 'event_counter', event: { type: 'track' }, within } }];
      const model = EngageModel.compile(specs);
      const log = Array.from({ length: 30 }, () => generate.message()).filter((m) => m.type === 'track');
      let state = emptyProfileState();
      for (const message of log) state = model.apply(state, message);
      const now = START + SPAN + generate.int(windowMs * 2);
      const counted = model.evaluate(state, now)['ct_n'] as number;
      const exact = naiveOutputs(specs, log, now, true)['ct_n'] as number;
      const withSlack = naiveOutputs(specs, log, now - windowMs / 25, true)['ct_n'] as number;
      assert.ok(exact <= counted && counted <= withSlack, `${within} at ${now}: exact ${exact}, counted ${counted}, with one bucket ${withSlack}`);
    }
  });

  it('merging the states of two halves equals applying everything (identity merge)', () => {
    const generate = new Generator(random(SEED + 2));
    for (let run = 0; run < 40; run++) {
      const specs = generate.specs();
      const model = EngageModel.compile(specs);
      let a = emptyProfileState();
      let b = emptyProfileState();
      let all = emptyProfileState();
      let newest = -Infinity;
      for (let i = 0; i < 60; i++) {
        const message = generate.message();
        newest = Math.max(newest, message.timestamp);
        all = model.apply(all, message);
        if (generate.chance(0.5)) a = model.apply(a, message);
        else b = model.apply(b, message);
      }
      const merged = mergeProfileStates(clone(a), clone(b));
      for (let k = 0; k < 5; k++) {
        const now = generate.now(newest);
        assert.deepStrictEqual(model.evaluate(merged, now), model.evaluate(all, now), `run ${run} now ${now}`);
      }
      assert.deepStrictEqual(profileTraits(merged), profileTraits(all));
      assert.deepStrictEqual(model.evaluate(mergeProfileStates(b, a), newest), model.evaluate(all, newest), 'merge is symmetric');
    }
  });

  it('a backfill with `only` builds the same accumulators as live messages did', () => {
    const generate = new Generator(random(SEED + 3));
    for (let run = 0; run < 20; run++) {
      const specs = generate.specs();
      const model = EngageModel.compile(specs);
      const log = Array.from({ length: 50 }, () => generate.message());
      let live = emptyProfileState();
      for (const message of log) live = model.apply(live, message);
      const target = generate.pick(specs);
      // The computation is reset (definition changed) and rebuilt from history; the rest is untouched.
      let rebuilt = model.reset(clone(live), target.id);
      for (const message of log) rebuilt = model.apply(rebuilt, message, new Set([target.id]));
      assert.deepStrictEqual(rebuilt, live, `run ${run} ${target.id}`);
    }
  });
});
