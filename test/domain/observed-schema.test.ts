import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capObserved, escapeKey, eventKey, ObservedBatch, OBSERVED_BOUNDS, shapeOf, splitPath } from '../../src/domain/observed-schema.js';

describe('observed schema (pure)', () => {
  it('paths split back into their keys, escapes included', () => {
    for (const keys of [['a'], ['a', 'b'], ['items', '[]', 'sku'], ['m', '[]', '[]'], ['dotted.key', 'x[y]', 'back\\slash'], ['a', '', 'b']]) {
      let path = '';
      for (const key of keys) path = key === '[]' ? `${path}[]` : path === '' ? escapeKey(key) : `${path}.${escapeKey(key)}`;
      assert.deepEqual(splitPath(path), keys, path);
    }
  });

  it('walks at most the depth, array items and paths per message its bounds say, and says when it cut', () => {
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 10; i++) deep = { [`l${i}`]: deep };
    const shape = shapeOf({ event: 'E', properties: deep }, 'track');
    assert.equal(shape.cut, true);
    assert.equal(Math.max(...shape.paths.map((p) => splitPath(p).length)), OBSERVED_BOUNDS.depth);
    const items = shapeOf({ event: 'E', properties: { list: Array.from({ length: 50 }, (_, i) => ({ [`k${i}`]: i })) } }, 'track');
    assert.equal(items.paths.filter((p) => p.startsWith('list[].')).length, OBSERVED_BOUNDS.arrayItems);
    const shallow = shapeOf({ traits: { a: 1, b: [1, 'x'] } }, 'identify');
    assert.deepEqual(shallow.paths, ['a', 'b', 'b[]']);
    assert.equal(shallow.cut, false);
    assert.equal(shapeOf({ userId: 'u', previousId: 'p' }, 'alias').paths.length, 0);
  });

  it('caps new events per source and day, biggest counts first; known ones keep counting', () => {
    const batch = new ObservedBatch();
    const shape = (event: string) => shapeOf({ event, properties: { a: 1 } }, 'track');
    batch.add('s', 0, shape('small'));
    batch.add('s', 0, shape('big'));
    batch.add('s', 0, shape('big'));
    batch.add('s', 0, shape('known'));
    const bounds = { ...OBSERVED_BOUNDS, eventsPerSource: 2 };
    const writes = capObserved(batch, { eventsPerDay: new Map([['s\u00000', 1]]), knownEvents: new Set([eventKey('s', 0, 'track', 'known')]), pathsPerEvent: new Map(), knownPaths: new Set() }, bounds);
    assert.deepEqual(writes.events.map((e) => `${e.event}=${e.count}`), ['big=2', 'known=1']);
    assert.deepEqual(writes.unrecorded, [{ sourceId: 's', day: 0, count: 1 }]);
  });
});
