import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFilters } from '../../src/domain/destination-filters.js';
import { REPLAY_WINDOW, nextReplayWindow, pickReplayPage } from '../../src/domain/replay.js';

describe('replay pacing', () => {
  it('grows the window while steps are on time, halves it when one is late, within its bounds', () => {
    let window: number = REPLAY_WINDOW.start;
    for (let i = 0; i < 100; i++) window = nextReplayWindow(window, 0);
    assert.equal(window, REPLAY_WINDOW.max, 'on time: up to the maximum, no further');
    assert.equal(nextReplayWindow(window, REPLAY_WINDOW.lateMs), REPLAY_WINDOW.max, 'at the threshold still on time');
    assert.equal(nextReplayWindow(window, REPLAY_WINDOW.lateMs + 1), Math.floor(REPLAY_WINDOW.max / 2));
    for (let i = 0; i < 100; i++) window = nextReplayWindow(window, 1_000);
    assert.equal(window, REPLAY_WINDOW.min, 'late: down to the minimum, never to zero');
    assert.equal(nextReplayWindow(window, 0), REPLAY_WINDOW.min + REPLAY_WINDOW.grow);
  });

  it('keeps a replay below an origin\'s 64 in-flight slots', () => {
    assert.ok(REPLAY_WINDOW.max < 64);
    assert.ok(REPLAY_WINDOW.min > 0 && REPLAY_WINDOW.start >= REPLAY_WINDOW.min && REPLAY_WINDOW.start <= REPLAY_WINDOW.max);
  });

  describe('picking a page', () => {
    const selection = { from: 100, to: 200, types: ['track'], events: undefined };
    const message = (seq: number, type = 'track', userId = 'u') => ({
      seq,
      status: 'accepted',
      type,
      userId,
      receivedAt: 100 + seq,
      body: JSON.stringify({ type, event: 'E', userId }),
    });
    const keepAll = (): boolean => true;

    it('takes every selected message of the page when there is room, and moves the cursor past the page', () => {
      const page = [message(1), message(2, 'identify'), message(3), message(4)];
      assert.deepEqual(pickReplayPage(page, 10, selection, [], keepAll), { seqs: [1, 3, 4], toCursor: 4 });
    });

    it('stops the cursor at the message that filled the room, so the rest is read again', () => {
      const page = [message(1), message(2), message(3), message(4)];
      assert.deepEqual(pickReplayPage(page, 2, selection, [], keepAll), { seqs: [1, 2], toCursor: 2 });
      const rest = page.filter((m) => m.seq > 2);
      assert.deepEqual(pickReplayPage(rest, 2, selection, [], keepAll), { seqs: [3, 4], toCursor: 4 });
    });

    it('does not count messages passed over against the room', () => {
      const page = [message(1, 'identify'), message(2, 'page'), message(3), message(4, 'identify'), message(5)];
      assert.deepEqual(pickReplayPage(page, 1, selection, [], keepAll), { seqs: [3], toCursor: 3 });
    });

    it('leaves out what the caller rejects (suppressed users) and messages outside the range', () => {
      const page = [message(1, 'track', 'gone'), message(2), { ...message(3), receivedAt: 250 }];
      assert.deepEqual(pickReplayPage(page, 10, selection, [], (m) => m.userId !== 'gone'), { seqs: [2], toCursor: 3 });
    });

    it('applies the destination filters as they are now', () => {
      const page = [message(1), { ...message(2), body: JSON.stringify({ type: 'track', event: 'Secret' }) }];
      const filters = parseFilters([{ title: 'no secrets', if: { field: 'event', op: '=', value: 'Secret' }, action: 'drop' }]);
      const picked = pickReplayPage(page, 10, selection, filters, keepAll);
      assert.deepEqual(picked, { seqs: [1], toCursor: 2 });
    });

    it('queues nothing without room or messages', () => {
      assert.equal(pickReplayPage([message(1)], 0, selection, [], keepAll), undefined);
      assert.equal(pickReplayPage([], 10, selection, [], keepAll), undefined);
    });
  });
});
