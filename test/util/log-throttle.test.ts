import assert from 'node:assert/strict';
import { it } from 'node:test';
import { LogThrottle } from '../../src/util/log-throttle.js';

it('LogThrottle: due at the first event, then at most once per period, with the counts of each kind since the last', () => {
  let now = 1_000;
  const throttle = new LogThrottle<'a' | 'b'>(10_000, () => now);
  assert.deepEqual(throttle.count('a'), { a: 1 });
  assert.equal(throttle.count('a'), undefined);
  now += 5_000;
  assert.equal(throttle.count('b'), undefined);
  now += 5_000;
  assert.deepEqual(throttle.count('a'), { a: 2, b: 1 });
  now += 9_999;
  assert.equal(throttle.count('b'), undefined);
});
