import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  capObserved,
  DAY_MS,
  decodeSchemaCursor,
  encodeSchemaCursor,
  escapeKey,
  eventKey,
  ObservedBatch,
  OBSERVED_BOUNDS,
  observedDays,
  ObservedSchemaPage,
  shapeOf,
  splitPath,
} from '../../src/domain/observed-schema.js';

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

  it('reads at most the kept days of a period, whatever it asks', () => {
    const now = Date.UTC(2025, 0, 31, 12);
    const today = Date.UTC(2025, 0, 31);
    assert.deepEqual(observedDays(today - DAY_MS, today, now), [today - DAY_MS, today]);
    const all = observedDays(0, Date.UTC(9999, 11, 30), now);
    assert.equal(all.length, OBSERVED_BOUNDS.retentionDays + 2, 'retention days, today and tomorrow');
    assert.deepEqual([all[0], all[all.length - 1]], [today - OBSERVED_BOUNDS.retentionDays * DAY_MS, today + DAY_MS]);
    assert.deepEqual(observedDays(today + 5 * DAY_MS, today + 6 * DAY_MS, now), []);
  });

  it('cursors name a position, and refuse anything else', () => {
    const position = { count: 12, type: 'track', event: 'Order \u00e9 😀' };
    assert.deepEqual(decodeSchemaCursor(encodeSchemaCursor(position)), position);
    for (const bad of ['', 'a!', Buffer.from('[1,"track"]').toString('base64url'), Buffer.from('[-1,"t","e"]').toString('base64url'), Buffer.from('[1,"t","\\u0000"]').toString('base64url'), 'x'.repeat(3_000)]) {
      assert.equal(decodeSchemaCursor(bad), undefined, bad.slice(0, 40));
    }
  });

  it('makes a page of events while their paths fit the budget (the first always does), and points after the last shown', () => {
    const events = [50, 40, 30, 20].map((count, i) => ({ type: 'track', event: `E${i}`, count, pathsTruncated: false }));
    const pathsOf = (event: string, n: number) => Array.from({ length: n }, (_, k) => ({ type: 'track', event, path: `p${String(k).padStart(3, '0')}`, types: 1, count: 1 }));
    const sizes = [5, 3, 4, 1];
    // Budget 8: E0 (5) and E1 (3) fit, E2 (4) does not; one event's paths read at a time; at most 4 paths per event.
    const page = new ObservedSchemaPage(events, 10, 8, 0, { pathsPerEvent: 4, eventsPerRead: 1 });
    const read: string[] = [];
    for (let next = page.next(); next.length > 0; next = page.next()) {
      read.push(...next.map((e) => e.event));
      page.add(next.flatMap((e) => pathsOf(e.event, sizes[Number(e.event.slice(1))]!)));
    }
    const view = page.view();
    // E0 shows 4 of 5 (pathsTruncated), E1 3: 7; E2's 4 are past the budget's 8.
    assert.deepEqual(view.events.map((e) => [e.event, e.paths.length, e.pathsTruncated]), [['E0', 4, true], ['E1', 3, false]]);
    assert.deepEqual(read, ['E0', 'E1', 'E2'], 'paths are read for one event past the page at most');
    assert.deepEqual(decodeSchemaCursor(view.cursor!), { count: 40, type: 'track', event: 'E1' });
    assert.equal(view.truncated.events, true);

    const oneBig = new ObservedSchemaPage(events.slice(0, 1), 10, 2, 0, { pathsPerEvent: 4, eventsPerRead: 1 });
    oneBig.add(pathsOf('E0', 5));
    assert.deepEqual([oneBig.view().events.length, oneBig.view().cursor, oneBig.view().truncated.events], [1, undefined, false], 'the first event always fits');

    const byLimit = new ObservedSchemaPage(events.slice(0, 3), 2, 100, 3);
    byLimit.add([]);
    assert.deepEqual(byLimit.next(), []);
    assert.deepEqual(byLimit.view().events.map((e) => e.event), ['E0', 'E1']);
    assert.deepEqual(decodeSchemaCursor(byLimit.view().cursor!)?.event, 'E1', 'limit + 1 candidates: there is a next page');
    assert.deepEqual(byLimit.view().truncated, { events: true, unrecordedMessages: 3 });
  });
});
