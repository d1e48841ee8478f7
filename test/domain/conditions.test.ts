import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compare, matches, parseCondition, readPath } from '../../src/domain/conditions.js';

describe('conditions', () => {
  it('compares with every operator', () => {
    const table: Array<[unknown, Parameters<typeof compare>[1], unknown, boolean]> = [
      ['pro', '=', 'pro', true],
      ['pro', '!=', 'pro', false],
      [undefined, '!=', 'pro', true],
      [{ a: [1] }, '=', { a: [1] }, true],
      [3, '>', 2, true],
      [2, '>=', 2, true],
      [1, '<', 2, true],
      [2, '<=', 1, false],
      ['2024-02-01', '>', '2024-01-31', true],
      ['3', '>', 2, false], // mixed kinds never order
      ['hello world', 'contains', 'lo w', true],
      [['a', 'b'], 'contains', 'b', true],
      [['a', 'b'], 'contains', 'c', false],
      [42, 'contains', 4, false],
      [0, 'exists', undefined, true],
      [null, 'exists', undefined, false],
      [undefined, 'exists', undefined, false],
    ];
    for (const [actual, op, expected, result] of table) {
      assert.equal(compare(actual, op, expected), result, `${JSON.stringify(actual)} ${op} ${JSON.stringify(expected)}`);
    }
  });

  it('reads dotted paths of own properties only', () => {
    const message = { properties: { product: { sku: 'x' } } };
    assert.equal(readPath(message, 'properties.product.sku'), 'x');
    assert.equal(readPath(message, 'properties.missing.sku'), undefined);
    assert.equal(readPath(message, 'properties.constructor'), undefined);
  });

  it('combines with and, or and not', () => {
    const condition = parseCondition(
      { and: [{ field: 'type', op: '=', value: 'track' }, { not: { or: [{ field: 'event', op: '=', value: 'Ping' }, { field: 'event', op: '=', value: 'Pong' }] } }] },
      'if',
    );
    assert.equal(matches(condition, { type: 'track', event: 'Bought' }), true);
    assert.equal(matches(condition, { type: 'track', event: 'Pong' }), false);
    assert.equal(matches(condition, { type: 'page' }), false);
  });

  it('names the field of an invalid condition', () => {
    assert.throws(() => parseCondition({ or: [] }, 'if'), /if\.or must list 1 to 50/);
    assert.throws(() => parseCondition({ field: 'a', op: '>', value: true }, 'if'), /if\.value must be a number or a string/);
    assert.throws(() => parseCondition({ field: 'a', op: '=' }, 'if'), /if\.value is required/);
    assert.throws(() => parseCondition({ field: 'a', op: '=', value: 1, extra: 1 }, 'if'), /if\.extra is not a condition field/);
    let deep: unknown = { field: 'a', op: 'exists' };
    for (let i = 0; i < 10; i++) deep = { not: deep };
    assert.throws(() => parseCondition(deep, 'if'), /nests more than 8 levels/);
  });
});
