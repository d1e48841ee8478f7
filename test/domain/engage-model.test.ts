import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ComputationSpec,
  type EngageMessage,
  EngageModel,
  STATE_LIMITS,
  diffOutputs,
  emptyProfileState,
  mergeProfileStates,
  profileTraits,
} from '../../src/domain/engage/index.js';

const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const trait = (id: string, definition: unknown): ComputationSpec => ({ id, kind: 'trait', key: id.replace(/^ct_/, ''), definition });
const audience = (id: string, definition: unknown): ComputationSpec => ({ id, kind: 'audience', key: id.replace(/^aud_/, ''), definition });
const track = (event: string, properties: Record<string, unknown>, timestamp: number): EngageMessage => ({ type: 'track', event, properties, timestamp });
const identify = (traits: Record<string, unknown>, timestamp: number): EngageMessage => ({ type: 'identify', traits, timestamp });

function run(specs: ComputationSpec[], messages: EngageMessage[]) {
  const model = EngageModel.compile(specs);
  let state = emptyProfileState();
  for (const message of messages) state = model.apply(state, message);
  return { model, state, at: (now: number) => model.evaluate(state, now) };
}

describe('engage computed traits', () => {
  const orders = [
    track('Order Completed', { revenue: 30, sku: 'a', product: { sku: 'p1' } }, T0),
    track('Order Completed', { revenue: 10, sku: 'b', product: { sku: 'p2' } }, T0 + 2 * DAY),
    track('Order Completed', { revenue: 50, sku: 'a', product: { sku: 'p1' } }, T0 + DAY), // out of order
    track('Order Completed', { revenue: 'free', sku: 'c' }, T0 + 3 * DAY),
    track('Product Viewed', { revenue: 999, sku: 'z' }, T0 + 3 * DAY),
  ];
  const now = T0 + 3 * DAY + HOUR;

  it('event_counter, all time and windowed, with where', () => {
    const { at } = run(
      [
        trait('ct_all', { type: 'event_counter', event: 'Order Completed' }),
        trait('ct_2d', { type: 'event_counter', event: 'Order Completed', within: '2d' }),
        trait('ct_big', { type: 'event_counter', event: 'Order Completed', where: [{ property: 'revenue', op: '>=', value: 30 }] }),
        trait('ct_none', { type: 'event_counter', event: 'Refunded' }),
      ],
      orders,
    );
    // No value before a first matching event; 0 once they have all left the window.
    assert.deepStrictEqual(at(now), { ct_all: 4, ct_2d: 2, ct_big: 2, ct_none: undefined });
    assert.equal(at(now + 10 * DAY)['ct_2d'], 0);
  });

  it('aggregation sum, avg, min, max over numbers only', () => {
    const fns = ['sum', 'avg', 'min', 'max'] as const;
    const { at } = run(
      fns.map((fn) => trait(`ct_${fn}`, { type: 'aggregation', fn, event: 'Order Completed', property: 'revenue' })),
      orders,
    );
    assert.deepStrictEqual(at(now), { ct_sum: 90, ct_avg: 30, ct_min: 10, ct_max: 50 });
    const empty = run(fns.map((fn) => trait(`ct_${fn}`, { type: 'aggregation', fn, event: 'Order Completed', property: 'revenue' })), []);
    assert.deepStrictEqual(empty.at(now), { ct_sum: undefined, ct_avg: undefined, ct_min: undefined, ct_max: undefined });
  });

  it('first and last by timestamp, not by arrival; windowed first is the oldest still in the window', () => {
    const { at } = run(
      [
        trait('ct_first', { type: 'first', event: 'Order Completed', property: 'sku' }),
        trait('ct_last', { type: 'last', event: 'Order Completed', property: 'product.sku' }),
        trait('ct_first_36h', { type: 'first', event: 'Order Completed', property: 'revenue', within: '36h' }),
      ],
      orders,
    );
    assert.deepStrictEqual(at(now), { ct_first: 'a', ct_last: 'p2', ct_first_36h: 10 });
  });

  it('most_frequent, unique_list and unique_list_count', () => {
    const { at } = run(
      [
        trait('ct_mf', { type: 'most_frequent', event: 'Order Completed', property: 'sku' }),
        trait('ct_list', { type: 'unique_list', event: 'Order Completed', property: 'sku' }),
        trait('ct_count', { type: 'unique_list_count', event: 'Order Completed', property: 'sku' }),
        trait('ct_list_1d', { type: 'unique_list', event: 'Order Completed', property: 'sku', within: '1d' }),
      ],
      orders,
    );
    assert.deepStrictEqual(at(now), { ct_mf: 'a', ct_list: ['a', 'b', 'c'], ct_count: 3, ct_list_1d: ['c'] });
    assert.deepStrictEqual(at(now + 2 * DAY), { ct_mf: 'a', ct_list: ['a', 'b', 'c'], ct_count: 3, ct_list_1d: undefined });
  });

  it('matches message types and reads traits for identify', () => {
    const { at } = run(
      [trait('ct_pages', { type: 'event_counter', event: { type: 'page' } }), trait('ct_plans', { type: 'unique_list', event: { type: 'identify' }, property: 'plan' })],
      [{ type: 'page', properties: {}, timestamp: T0 }, identify({ plan: 'free' }, T0), identify({ plan: 'pro' }, T0 + 1), { type: 'screen', timestamp: T0 }],
    );
    assert.deepStrictEqual(at(T0 + 2), { ct_pages: 1, ct_plans: ['free', 'pro'] });
  });
});

describe('engage audiences', () => {
  it('performed with a count in a window, and notPerformed; leaving the window is noticed', () => {
    const { model, state, at } = run(
      [
        audience('aud_repeat', { performed: { event: 'Order Completed', within: '7d', count: { op: '>=', value: 2 } } }),
        audience('aud_lapsed', { and: [{ performed: { event: 'Order Completed' } }, { notPerformed: { event: 'Order Completed', within: '7d' } }] }),
      ],
      [track('Order Completed', {}, T0), track('Order Completed', {}, T0 + DAY)],
    );
    assert.deepStrictEqual(at(T0 + DAY), { aud_repeat: true, aud_lapsed: false });
    const expiry = model.nextExpiry(state, T0 + DAY)!;
    // The first order leaves the 7-day window at most one bucket (7d / 64 rounded up to 3h) late.
    assert.ok(expiry > T0 + 7 * DAY && expiry <= T0 + 7 * DAY + 3 * HOUR, new Date(expiry).toISOString());
    assert.deepStrictEqual(at(expiry - 1), { aud_repeat: true, aud_lapsed: false });
    assert.deepStrictEqual(at(expiry), { aud_repeat: false, aud_lapsed: false });
    const last = model.nextExpiry(state, expiry)!;
    assert.deepStrictEqual(at(last), { aud_repeat: false, aud_lapsed: true });
    assert.equal(model.nextExpiry(state, last), undefined);
  });

  it('trait, computedTrait, inAudience and notInAudience read the same evaluation', () => {
    const specs = [
      audience('aud_vip', { and: [{ inAudience: 'spenders' }, { trait: { key: 'plan', op: '=', value: 'pro' } }] }),
      audience('aud_others', { notInAudience: 'vip' }),
      audience('aud_spenders', { computedTrait: { key: 'revenue_30d', op: '>=', value: 100 } }),
      trait('ct_revenue_30d', { type: 'aggregation', fn: 'sum', event: 'Order Completed', property: 'revenue', within: '30d' }),
    ];
    const { at } = run(specs, [identify({ plan: 'pro' }, T0), track('Order Completed', { revenue: 120 }, T0)]);
    assert.deepStrictEqual(at(T0), { ct_revenue_30d: 120, aud_spenders: true, aud_vip: true, aud_others: false });
    assert.deepStrictEqual(at(T0 + 31 * DAY), { ct_revenue_30d: 0, aud_spenders: false, aud_vip: false, aud_others: true });
  });

  it('or and not', () => {
    const { at } = run(
      [audience('aud_x', { or: [{ trait: { key: 'age', op: '>', value: 60 } }, { not: { trait: { key: 'email', op: 'exists' } } }] })],
      [identify({ age: 30, email: 'a@b.c' }, T0)],
    );
    assert.deepStrictEqual(at(T0), { aud_x: false });
  });
});

describe('engage profile state', () => {
  it('merges identify traits key by key, newest timestamp winning whatever the arrival order', () => {
    const model = EngageModel.compile([]);
    let state = emptyProfileState();
    state = model.apply(state, identify({ plan: 'pro', city: 'Oslo' }, T0 + 10));
    state = model.apply(state, identify({ plan: 'free', email: 'a@b.c' }, T0)); // older: plan stays
    state = model.apply(state, identify({ city: 'Lyon', ['__proto__']: 'x' }, T0 + 20));
    assert.deepStrictEqual(profileTraits(state), { plan: 'pro', city: 'Lyon', email: 'a@b.c' });
    assert.equal(Object.getPrototypeOf(state.traits), Object.prototype);
  });

  it('bounds trait keys, trait sizes, unique lists and most-frequent candidates', () => {
    const model = EngageModel.compile([
      trait('ct_list', { type: 'unique_list_count', event: 'View', property: 'id' }),
      trait('ct_mf', { type: 'most_frequent', event: 'View', property: 'id' }),
    ]);
    let state = emptyProfileState();
    const many: Record<string, unknown> = {};
    for (let i = 0; i < 300; i++) many[`k${i}`] = i;
    state = model.apply(state, identify({ ...many, big: 'x'.repeat(5000) }, T0));
    assert.equal(Object.keys(profileTraits(state)).length, STATE_LIMITS.traitKeys);
    assert.equal(profileTraits(state)['big'], undefined);
    // A frequent value keeps its place among 1,000 one-off values (Space-Saving).
    for (let i = 0; i < 1000; i++) {
      state = model.apply(state, track('View', { id: `once-${i}` }, T0 + i));
      if (i % 10 === 0) state = model.apply(state, track('View', { id: 'often' }, T0 + i));
    }
    assert.deepStrictEqual(model.evaluate(state, T0 + 2000), { ct_list: STATE_LIMITS.uniqueValues, ct_mf: 'often' });
    assert.equal(Object.keys(state.acc['ct_mf']!.a[0]!.c!).length, STATE_LIMITS.frequentCandidates);
    // The unique list keeps the most recently seen values.
    const kept = state.acc['ct_list']!.a[0]!.u!.map(([json]) => json);
    assert.ok(kept.includes('"once-999"') && !kept.includes('"once-0"'));
  });

  it('keeps a bounded number of buckets per window and none for all time', () => {
    const model = EngageModel.compile([trait('ct_30d', { type: 'event_counter', event: 'Tick', within: '30d' }), trait('ct_all', { type: 'event_counter', event: 'Tick' })]);
    let state = emptyProfileState();
    for (let i = 0; i < 2000; i++) state = model.apply(state, track('Tick', {}, T0 + i * HOUR));
    const newest = T0 + 1999 * HOUR;
    assert.ok(state.acc['ct_30d']!.a[0]!.b!.length <= 62, String(state.acc['ct_30d']!.a[0]!.b!.length));
    assert.equal(state.acc['ct_all']!.a[0]!.b, undefined);
    const counted = model.evaluate(state, newest)['ct_30d'] as number;
    assert.ok(counted >= 30 * 24 && counted <= 30 * 24 + 12, String(counted));
    assert.equal(model.evaluate(state, newest)['ct_all'], 2000);
    const pruned = model.prune(state, newest + 40 * DAY);
    assert.deepStrictEqual(pruned.acc['ct_30d']!.a, [{ f: 'n', w: 12 * HOUR }], 'no bucket left, but the trait remembers that it counted');
    assert.deepStrictEqual(model.evaluate(pruned, newest + 40 * DAY), { ct_30d: 0, ct_all: 2000 });
  });

  it('ignores, then replaces, accumulators built for another version of a definition; prune drops deleted ones', () => {
    const v1 = EngageModel.compile([trait('ct_n', { type: 'event_counter', event: 'A' }), trait('ct_gone', { type: 'event_counter', event: 'A' })]);
    const v2 = EngageModel.compile([trait('ct_n', { type: 'event_counter', event: 'B' })]);
    let state = v1.apply(emptyProfileState(), track('A', {}, T0));
    assert.deepStrictEqual(v2.evaluate(state, T0), { ct_n: undefined });
    state = v2.apply(state, track('B', {}, T0));
    assert.deepStrictEqual(v2.evaluate(state, T0), { ct_n: 1 });
    assert.ok(state.acc['ct_gone']);
    state = v2.prune(state, T0);
    assert.deepStrictEqual(Object.keys(state.acc), ['ct_n']);
  });

  it('merges two profiles: traits newest-wins, counts add up, first is the earliest', () => {
    const model = EngageModel.compile([
      trait('ct_n', { type: 'event_counter', event: 'Order Completed', within: '30d' }),
      trait('ct_first', { type: 'first', event: 'Order Completed', property: 'sku' }),
      audience('aud_repeat', { performed: { event: 'Order Completed', count: { op: '>=', value: 2 } } }),
    ]);
    const a = model.apply(model.apply(emptyProfileState(), identify({ plan: 'free' }, T0)), track('Order Completed', { sku: 'late' }, T0 + DAY));
    const b = model.apply(model.apply(emptyProfileState(), identify({ plan: 'pro' }, T0 + 5)), track('Order Completed', { sku: 'early' }, T0));
    const before = { a: JSON.stringify(a), b: JSON.stringify(b) };
    const merged = mergeProfileStates(a, b);
    assert.deepStrictEqual(model.evaluate(merged, T0 + DAY), { ct_n: 2, ct_first: 'early', aud_repeat: true });
    assert.deepStrictEqual(profileTraits(merged), { plan: 'pro' });
    assert.deepStrictEqual({ a: JSON.stringify(a), b: JSON.stringify(b) }, before, 'inputs unchanged');
  });

  it('affectedBy names the computations a message can change, and what reads them', () => {
    const model = EngageModel.compile([
      trait('ct_orders', { type: 'event_counter', event: 'Order Completed', where: [{ property: 'revenue', op: '>', value: 0 }] }),
      trait('ct_pages', { type: 'event_counter', event: { type: 'page' } }),
      audience('aud_buyers', { computedTrait: { key: 'orders', op: '>', value: 0 } }),
      audience('aud_pro', { trait: { key: 'plan', op: '=', value: 'pro' } }),
      audience('aud_pro_buyers', { and: [{ inAudience: 'buyers' }, { inAudience: 'pro' }] }),
    ]);
    assert.deepStrictEqual(model.affectedBy(track('Order Completed', { revenue: 5 }, T0)), ['ct_orders', 'aud_buyers', 'aud_pro_buyers']);
    assert.deepStrictEqual(model.affectedBy(track('Order Completed', { revenue: 0 }, T0)), []);
    assert.deepStrictEqual(model.affectedBy({ type: 'page', timestamp: T0 }), ['ct_pages']);
    assert.deepStrictEqual(model.affectedBy(identify({ plan: 'pro' }, T0)), ['aud_pro', 'aud_pro_buyers']);
    assert.deepStrictEqual(model.affectedBy({ type: 'alias', timestamp: T0 }), []);
  });

  it('apply with `only` leaves traits and other computations alone', () => {
    const model = EngageModel.compile([trait('ct_a', { type: 'event_counter', event: { type: 'identify' } }), trait('ct_b', { type: 'event_counter', event: { type: 'identify' } })]);
    const state = model.apply(emptyProfileState(), identify({ plan: 'pro' }, T0), new Set(['ct_a']));
    assert.deepStrictEqual(profileTraits(state), {});
    assert.deepStrictEqual(model.evaluate(state, T0), { ct_a: 1, ct_b: undefined });
    assert.deepStrictEqual(Object.keys(model.reset(state, 'ct_a').acc), []);
  });
});

describe('engage diffOutputs', () => {
  it('reports changed values, audience leaves as false and vanished trait values as null', () => {
    const before = { aud_1: true, aud_2: false, ct_1: 3, ct_2: ['a'], ct_3: 'x', ct_gone: 1 };
    const after = { aud_1: false, aud_2: false, ct_1: 4, ct_2: ['a'], ct_3: undefined, ct_new: 0 };
    assert.deepStrictEqual(diffOutputs(before, after), [
      ['aud_1', false],
      ['ct_1', 4],
      ['ct_3', null],
      ['ct_new', 0],
    ]);
    const model = EngageModel.compile([audience('aud_planned', { trait: { key: 'plan', op: 'exists' } }), trait('ct_count', { type: 'event_counter', event: 'x' })]);
    assert.deepStrictEqual(diffOutputs(model.evaluate(emptyProfileState(), T0), model.evaluate(emptyProfileState(), T0)), [], 'a new profile diffed against the empty state changes nothing');
  });
});
