import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DefinitionError,
  EngageModel,
  WINDOW_BUCKETS,
  bucketSizeFor,
  keyFromName,
  parseAudienceDefinition,
  parseComputedTraitDefinition,
  parseWithin,
  referencedKeys,
} from '../../src/domain/engage/index.js';

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof DefinitionError, String(error));
    assert.ok(error.message.startsWith(error.field), 'the message names the field');
    return error.field;
  }
  assert.fail('expected a DefinitionError');
}

describe('engage definitions', () => {
  it('parses every computed trait type, normalized', () => {
    assert.deepStrictEqual(parseComputedTraitDefinition({ type: 'event_counter', event: 'Order Completed', within: '30d', where: [] }), {
      type: 'event_counter',
      event: 'Order Completed',
      within: '30d',
    });
    assert.deepStrictEqual(
      parseComputedTraitDefinition({ type: 'aggregation', fn: 'avg', event: 'Order Completed', property: 'revenue', where: [{ property: 'currency', op: '=', value: 'EUR' }] }),
      { type: 'aggregation', fn: 'avg', event: 'Order Completed', where: [{ property: 'currency', op: '=', value: 'EUR' }], property: 'revenue' },
    );
    for (const type of ['most_frequent', 'first', 'last', 'unique_list', 'unique_list_count']) {
      assert.deepStrictEqual(parseComputedTraitDefinition({ type, event: { type: 'page' }, property: 'product.sku' }), { type, event: { type: 'page' }, property: 'product.sku' });
    }
  });

  it('parses every audience condition, with the default count', () => {
    const definition = {
      and: [
        { performed: { event: 'Order Completed', within: '30d' } },
        { performed: { event: 'Order Completed', count: { op: '>=', value: 2 } } },
        { notPerformed: { event: { type: 'screen' }, within: '7d' } },
        { trait: { key: 'address.city', op: 'exists' } },
        { computedTrait: { key: 'orders_30d', op: '>=', value: 3 } },
        { or: [{ inAudience: 'vip' }, { not: { notInAudience: 'churned' } }] },
      ],
    };
    const parsed = parseAudienceDefinition(definition);
    assert.deepStrictEqual((parsed as any).and[0], { performed: { event: 'Order Completed', within: '30d', count: { op: '>=', value: 1 } } });
    assert.deepStrictEqual(parseAudienceDefinition(parsed), parsed, 'a parsed definition parses to itself');
    assert.deepStrictEqual(referencedKeys(parsed), ['orders_30d', 'vip', 'churned']);
    assert.deepStrictEqual(referencedKeys(parseComputedTraitDefinition({ type: 'event_counter', event: 'x' })), []);
  });

  it('names the field of an invalid definition', () => {
    const cases: Array<[() => unknown, string]> = [
      [() => parseComputedTraitDefinition(null), 'definition'],
      [() => parseComputedTraitDefinition({ type: 'median', event: 'x' }), 'definition.type'],
      [() => parseComputedTraitDefinition({ type: 'aggregation', fn: 'median', event: 'x', property: 'p' }), 'definition.fn'],
      [() => parseComputedTraitDefinition({ type: 'last', event: 'x' }), 'definition.property'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', property: 'p' }), 'definition.property'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: '' }), 'definition.event'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: { type: 'alias' } }), 'definition.event.type'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', within: '30 days' }), 'definition.within'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', within: '0d' }), 'definition.within'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', within: '3651d' }), 'definition.within'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', where: [{ property: 'a', op: 'like', value: 1 }] }), 'definition.where[0].op'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', where: [{ property: 'a', op: '>', value: true }] }), 'definition.where[0].value'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', where: [{ property: 'a', op: 'exists', value: 1 }] }), 'definition.where[0].value'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', where: [{ property: 'a..b', op: 'exists' }] }), 'definition.where[0].property'],
      [() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x', where: [{ property: 'a', op: '=', value: 'x'.repeat(2000) }] }), 'definition.where[0].value'],
      [() => parseAudienceDefinition({}), 'definition'],
      [() => parseAudienceDefinition({ performed: { event: 'x' }, trait: {} }), 'definition'],
      [() => parseAudienceDefinition({ joined: {} }), 'definition.joined'],
      [() => parseAudienceDefinition({ and: [] }), 'definition.and'],
      [() => parseAudienceDefinition({ or: [{ performed: { event: 'x', count: { op: 'contains', value: 1 } } }] }), 'definition.or[0].performed.count.op'],
      [() => parseAudienceDefinition({ performed: { event: 'x', count: { op: '>=', value: 1.5 } } }), 'definition.performed.count.value'],
      [() => parseAudienceDefinition({ notPerformed: { event: 'x', count: { op: '>=', value: 1 } } }), 'definition.notPerformed.count'],
      [() => parseAudienceDefinition({ trait: { key: 'plan', op: '=' } }), 'definition.trait.value'],
      [() => parseAudienceDefinition({ computedTrait: { key: 'Orders 30d', op: '>', value: 1 } }), 'definition.computedTrait.key'],
      [() => parseAudienceDefinition({ not: { inAudience: 'High Value' } }), 'definition.not.inAudience'],
    ];
    for (const [fn, field] of cases) assert.equal(fieldOf(fn), field);
  });

  it('bounds nesting, list lengths, condition counts and sizes', () => {
    let deep: unknown = { trait: { key: 'plan', op: 'exists' } };
    for (let i = 0; i < 9; i++) deep = { not: deep };
    assert.match(fieldOf(() => parseAudienceDefinition(deep)), /^definition(\.not){9}$/);
    const many = Array.from({ length: 51 }, () => ({ trait: { key: 'plan', op: 'exists' } }));
    assert.equal(fieldOf(() => parseAudienceDefinition({ or: many })), 'definition.or');
    const events = Array.from({ length: 21 }, () => ({ performed: { event: 'x' } }));
    assert.equal(fieldOf(() => parseAudienceDefinition({ or: events })), 'definition.or[20].performed');
    const wide = { or: Array.from({ length: 50 }, () => ({ and: Array.from({ length: 5 }, () => ({ trait: { key: 'plan', op: 'exists' } })) })) };
    assert.match(fieldOf(() => parseAudienceDefinition(wide)), /^definition\.or\[\d+\]/);
    assert.equal(fieldOf(() => parseComputedTraitDefinition({ type: 'event_counter', event: 'x'.repeat(201) })), 'definition.event');
  });

  it('makes keys from names', () => {
    assert.equal(keyFromName('High Value Users'), 'high_value_users');
    assert.equal(keyFromName('  Orders (last 30d)!'), 'orders_last_30d');
    assert.equal(keyFromName('ordersLast30d'), 'orders_last30d');
    assert.equal(keyFromName('Café fans'), 'cafe_fans');
    assert.equal(fieldOf(() => keyFromName('★★★')), 'name');
  });

  it('sizes window buckets so that a window has at most 64, each at most 1/25 of it', () => {
    assert.equal(parseWithin('30d', 'within'), 30 * 86400_000);
    assert.equal(bucketSizeFor(parseWithin('30d', 'w')), 12 * 3600_000);
    assert.equal(bucketSizeFor(parseWithin('24h', 'w')), 30 * 60_000);
    assert.equal(bucketSizeFor(parseWithin('1h', 'w')), 60_000);
    assert.equal(bucketSizeFor(parseWithin('10s', 'w')), 200);
    for (const within of ['1s', '7s', '45s', '1m', '13m', '90m', '1h', '5h', '1d', '2d', '7d', '30d', '90d', '365d', '3650d']) {
      const windowMs = parseWithin(within, 'w');
      const bucketMs = bucketSizeFor(windowMs);
      assert.ok(windowMs / bucketMs <= WINDOW_BUCKETS, within);
      assert.ok(bucketMs <= windowMs / 25, `${within}: ${bucketMs}`);
    }
  });

  it('compiles references, refusing unknown keys, duplicate keys and cycles', () => {
    const trait = { id: 'ct_1', kind: 'trait' as const, key: 'orders', definition: { type: 'event_counter', event: 'Order Completed' } };
    const audience = (id: string, key: string, definition: unknown) => ({ id, kind: 'audience' as const, key, definition });
    const model = EngageModel.compile([audience('aud_2', 'b', { inAudience: 'a' }), audience('aud_1', 'a', { computedTrait: { key: 'orders', op: '>', value: 0 } }), trait]);
    assert.equal(model.specs.length, 3);
    assert.equal(fieldOf(() => EngageModel.compile([audience('aud_1', 'a', { and: [{ trait: { key: 'x', op: 'exists' } }, { inAudience: 'nope' }] })])), 'definition.and[1].inAudience');
    assert.equal(fieldOf(() => EngageModel.compile([audience('aud_1', 'a', { computedTrait: { key: 'a', op: 'exists' } })])), 'definition.computedTrait.key');
    assert.equal(fieldOf(() => EngageModel.compile([trait, { ...trait, id: 'ct_2' }])), 'key');
    assert.throws(
      () => EngageModel.compile([audience('aud_1', 'a', { inAudience: 'b' }), audience('aud_2', 'b', { not: { inAudience: 'c' } }), audience('aud_3', 'c', { notInAudience: 'a' })]),
      (error: unknown) => error instanceof DefinitionError && /cycle of audiences: a → b → c → a/.test(error.message),
    );
    assert.equal(fieldOf(() => EngageModel.compile([audience('aud_1', 'a', { performed: { event: 'x', within: 'soon' } })])), 'definition.performed.within');
  });
});
