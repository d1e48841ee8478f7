import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MINUTE_MS, minuteOf, recount, tally, trafficSeries } from '../../src/domain/traffic.js';

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

  it('lists the counts in (minute, status) order, whatever order the events came in: every commit locks counter rows in one order', () => {
    const counts = tally([
      { at: M + 60_000, status: 'accepted' },
      { at: M + 3, status: 'rejected' },
      { at: M + 2, status: 'duplicate' },
      { at: M + 1, status: 'accepted' },
    ]);
    assert.deepEqual(
      counts.map((c) => [c.minute, c.status]),
      [
        [M, 'accepted'],
        [M, 'duplicate'],
        [M, 'rejected'],
        [M + MINUTE_MS, 'accepted'],
      ],
    );
  });

  it('moves a message whose status changed from the old status\'s count to the new one\'s, in the minute it was received', () => {
    const moves = recount([
      // Dropped and failed by its transformation; processing counted both accepted.
      { receivedAt: M + 1, from: 'accepted', to: 'filtered' },
      { receivedAt: M + 2, from: 'accepted', to: 'failed' },
      // A retry: one that failed now passes, another fails again (no move).
      { receivedAt: M + 3, from: 'failed', to: 'accepted' },
      { receivedAt: M + 4, from: 'failed', to: 'failed' },
      // Received a minute later: moved in that minute, whenever it changed.
      { receivedAt: M + MINUTE_MS, from: 'accepted', to: 'filtered' },
    ]);
    assert.deepEqual(moves, [
      // accepted -1 -1 +1 in M
      { minute: M, status: 'accepted', count: -1 },
      { minute: M, status: 'filtered', count: 1 },
      // failed +1 -1 nets to nothing: left out
      { minute: M + MINUTE_MS, status: 'accepted', count: -1 },
      { minute: M + MINUTE_MS, status: 'filtered', count: 1 },
    ]);
    // Each minute's counts still add up to what they did: a message is moved, never added or lost.
    for (const minute of [M, M + MINUTE_MS]) assert.equal(moves.filter((m) => m.minute === minute).reduce((total, m) => total + m.count, 0), 0);
    assert.deepEqual(recount([]), []);
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
