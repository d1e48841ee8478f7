import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DAY_MS, dayOf, type MessageShape, type ObservedEventRow, type ObservedPosition } from '../../src/domain/observed-schema.js';
import type { IngestEntry, SourceRecord, Store } from '../../src/store/store.js';

/**
 * The Store contract of the observed schema's bounded reads (events a page
 * at a time, then paths of named events only), one suite every adapter
 * runs. `open` gives a fresh, migrated, empty store.
 */
export function describeObservedContract(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  void describe(`Store contract, observed schema: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    const T0 = 1_700_000_000_000;
    const D0 = dayOf(T0);
    const D1 = D0 + DAY_MS;
    const source: SourceRecord = { id: 'src_observed', name: 'observed', writeKey: 'key_observed', enabled: true, createdAt: T0, updatedAt: T0 };
    let n = 0;
    const track = (event: string, paths: string[], receivedAt = T0, types: number[] = paths.map(() => 1)): IngestEntry => {
      const shape: MessageShape = { type: event === '' ? 'identify' : 'track', event, paths, types, cut: false };
      n++;
      return { sourceId: source.id, status: 'accepted', type: shape.type, messageId: `observed-${n}`, userId: 'u', receivedAt, body: JSON.stringify({ n }), destinations: [], shape };
    };

    before(async () => {
      ({ store, cleanup } = await open());
      await store.insertSource(source);
      const entries = [
        track('a', ['x', 'y']),
        track('a', ['x'], T0, [2]),
        track('b', ['z']),
        track('b', ['w'], D1 + 1_000),
        track('', ['email']),
        track('', ['email']),
        // Code point order: 'wide' < 'é' (U+00E9) < U+FFFD < '😀' (U+1F600), though UTF-16 puts the emoji's surrogates before U+FFFD.
        track('😀', ['p']),
        track('\uFFFD', ['p']),
        track('é', ['p']),
        track('wide', ['q4', 'q3', 'q2', 'q1', 'q0']),
      ];
      await store.appendRawRequests([{ sourceId: source.id, route: 'batch', receivedAt: T0, ip: undefined, configVersion: 1, messageCount: entries.length, headers: undefined, body: '{}' }]);
      const processed = await store.processRawRequests({ maxRequests: 10, maxMessages: 100 }, () => [entries], 0);
      assert.equal(processed.results.length, entries.length);
    });
    after(async () => {
      await cleanup();
    });

    const ORDER = [
      ['identify', '', 2],
      ['track', 'a', 2],
      ['track', 'b', 2],
      ['track', 'wide', 1],
      ['track', 'é', 1],
      ['track', '\uFFFD', 1],
      ['track', '😀', 1],
    ];
    const keys = (events: readonly ObservedEventRow[]) => events.map((e) => [e.type, e.event, e.count]);

    void it('lists the events of the days asked, biggest count first, then by type and event in code point order', async () => {
      const all = await store.observedEvents(source.id, [D0, D1], undefined, 100);
      assert.deepEqual(keys(all.events), ORDER);
      assert.equal(all.unrecordedMessages, 0);
      assert.deepEqual(keys((await store.observedEvents(source.id, [D1], undefined, 100)).events), [['track', 'b', 1]], 'only the days named');
      assert.deepEqual(await store.observedEvents(source.id, [], undefined, 100), { events: [], unrecordedMessages: 0 });
      assert.deepEqual((await store.observedEvents('src_none', [D0], undefined, 100)).events, []);
    });

    void it('pages by position: at most limit events after it, each event exactly once', async () => {
      const seen: Array<Array<string | number>> = [];
      let after: ObservedPosition | undefined;
      for (let page = 0; page < 10; page++) {
        const { events } = await store.observedEvents(source.id, [D0, D1], after, 2);
        assert.ok(events.length <= 2);
        seen.push(...keys(events));
        const last = events[events.length - 1];
        if (events.length < 2 || last === undefined) break;
        after = last;
      }
      assert.deepEqual(seen, ORDER);
      assert.deepEqual(keys((await store.observedEvents(source.id, [D0, D1], { count: 1, type: 'track', event: 'é' }, 100)).events), ORDER.slice(5));
    });

    void it('reads the first paths of the events named only, summed over the days, in code point order', async () => {
      const paths = await store.observedPaths(source.id, [D0, D1], [{ type: 'track', event: 'wide' }, { type: 'track', event: 'b' }, { type: 'track', event: 'a' }], 3);
      const byEvent = (event: string) => paths.filter((p) => p.event === event).map((p) => [p.path, p.types, p.count]);
      assert.deepEqual(byEvent('wide'), [['q0', 1, 1], ['q1', 1, 1], ['q2', 1, 1]], 'the first perEvent');
      assert.deepEqual(byEvent('b'), [['w', 1, 1], ['z', 1, 1]]);
      assert.deepEqual(byEvent('a'), [['x', 3, 2], ['y', 1, 1]], 'types OR-ed, counts added');
      assert.equal(paths.some((p) => p.event !== 'wide' && p.event !== 'b' && p.event !== 'a'), false, 'no other event');
      assert.deepEqual((await store.observedPaths(source.id, [D1], [{ type: 'track', event: 'b' }], 10)).map((p) => p.path), ['w']);
      assert.deepEqual(await store.observedPaths(source.id, [D0, D1], [], 10), []);
      assert.deepEqual(await store.observedPaths(source.id, [], [{ type: 'track', event: 'a' }], 10), []);
    });
  });
}
