import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MINUTE_MS, minuteOf, tally, trafficSeries } from '../../src/domain/traffic.js';

const M = 1_700_000_040_000; // the start of a minute

describe('traffic counts', () => {
  it('puts a time in the minute that holds it', () => {
    assert.equal(minuteOf(M), M);
    assert.equal(minuteOf(M + 59_999), M);
    assert.equal(minuteOf(M + 60_000), M + MINUTE_MS);
  });

  it('adds events up per minute and status', () => {
    const counts = tally([
      { at: M + 1, status: 'accepted' },
      { at: M + 2, status: 'accepted' },
      { at: M + 3, status: 'rejected' },
      { at: M + 60_000, status: 'accepted' },
    ]);
    assert.deepEqual(counts, [
      { minute: M, status: 'accepted', count: 2 },
      { minute: M, status: 'rejected', count: 1 },
      { minute: M + MINUTE_MS, status: 'accepted', count: 1 },
    ]);
    assert.deepEqual(tally([]), []);
  });

  it('makes one column per minute of the range, zeros included, the given statuses first', () => {
    const rows = [
      { minute: M, metric: 'messages' as const, status: 'accepted', count: 3 },
      { minute: M + 2 * MINUTE_MS, metric: 'messages' as const, status: 'filtered', count: 1 },
      { minute: M + MINUTE_MS, metric: 'deliveries' as const, status: 'succeeded', count: 9 },
      // Outside the range: left out.
      { minute: M - MINUTE_MS, metric: 'messages' as const, status: 'accepted', count: 5 },
      { minute: M + 3 * MINUTE_MS, metric: 'messages' as const, status: 'accepted', count: 5 },
    ];
    const series = trafficSeries(rows, 'messages', M + 10, M + 3 * MINUTE_MS, ['accepted', 'rejected']);
    assert.deepEqual(series.minutes, [M, M + MINUTE_MS, M + 2 * MINUTE_MS]);
    assert.deepEqual(series.counts, { accepted: [3, 0, 0], rejected: [0, 0, 0], filtered: [0, 0, 1] });
    assert.deepEqual(Object.keys(series.counts), ['accepted', 'rejected', 'filtered']);
    assert.equal(series.total, 4);
  });
});
