import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RateWindow } from '../../src/domain/rate-window.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

describe('maxRequestsPerSecond', () => {
  it('RateWindow never grants more than the limit in any sliding second', () => {
    let seed = 7;
    const random = (): number => ((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648);
    const window = new RateWindow(5);
    const grants: number[] = [];
    let now = 0;
    for (let i = 0; i < 2_000; i++) {
      now += Math.floor(random() * 120);
      const at = window.reserve(now, 1_000);
      if (at !== undefined) {
        assert.ok(at >= now, 'never in the past');
        grants.push(at);
      } else {
        assert.ok(window.nextFree(now) - now > 1_000, 'refused only when the wait is over the bound');
      }
    }
    grants.sort((a, b) => a - b);
    for (let i = 5; i < grants.length; i++) {
      assert.ok(grants[i]! - grants[i - 5]! >= 1_000, `grant ${i} is ${grants[i]! - grants[i - 5]!} ms after the 5th before it`);
    }
    assert.ok(grants.length > 500, 'and the cap is used');
  });

  it('rejects a cap outside 1 to 10,000', async () => {
    const sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    try {
      const { id } = await sy.createSource('caps');
      for (const cap of [0, 10_001, 1.5, '20']) {
        const put = await sy.admin('PUT', `/sources/${id}/destinations/webhooks`, {
          enabled: true,
          settings: { webhooks: [{ url: 'http://127.0.0.1:9/x', maxRequestsPerSecond: cap }] },
        });
        assert.equal(put.status, 400, `cap ${cap}`);
        assert.match(put.body.error.message, /settings\.webhooks\[0\]\.maxRequestsPerSecond must be (an integer|at least 1|at most 10000)/);
      }
    } finally {
      await sy.close();
    }
  });

  describe('a receiver capped at 20 a second', () => {
    const CAP = 20;
    const MESSAGES = 260;
    let sy: TestSwitchyard;
    let capped: TestReceiver;
    let free: TestReceiver;

    before(async () => {
      capped = await startReceiver();
      free = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    });
    after(async () => {
      await sy?.close();
      await capped?.close();
      await free?.close();
    });

    it('gets the cap over 10 s (within 10%), while another source is not held up, and nothing fails', async () => {
      const slow = await sy.createSource('capped');
      const put = await sy.admin('PUT', `/sources/${slow.id}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: capped.url, maxRequestsPerSecond: CAP }] },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.settings.webhooks[0].maxRequestsPerSecond, CAP);
      const fast = await sy.createSource('uncapped');
      assert.equal((await sy.admin('PUT', `/sources/${fast.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: free.url }] } })).status, 200);

      const arrivals: number[] = [];
      capped.reply = () => {
        arrivals.push(Date.now());
        return {};
      };
      for (let sent = 0; sent < MESSAGES; sent += 100) {
        const batch = Array.from({ length: Math.min(100, MESSAGES - sent) }, (_, i) => ({ type: 'track', userId: 'u', event: 'E', messageId: `cap-${sent + i}` }));
        assert.equal((await sy.send('/v1/batch', slow.writeKey, { batch })).status, 200);
      }
      // The other source's message goes through while the capped backlog waits.
      assert.equal((await sy.send('/v1/track', fast.writeKey, { userId: 'v', event: 'E', messageId: 'free-1' })).status, 200);
      await eventually(() => (free.requests.length > 0 ? true : undefined), 20_000, 'the uncapped receiver');
      assert.ok(capped.requests.length < MESSAGES, 'the uncapped message did not wait for the whole capped backlog');

      await eventually(() => (capped.requests.length >= MESSAGES ? true : undefined), 60_000, 'every capped message');
      const first = arrivals[0]!;
      const inTenSeconds = arrivals.filter((t) => t < first + 10_000).length;
      assert.ok(
        inTenSeconds >= CAP * 10 * 0.9 && inTenSeconds <= CAP * 10 * 1.1,
        `${inTenSeconds} POSTs in the first 10 s; the cap allows ${CAP * 10}`,
      );
      const ids = new Set(capped.requests.map((r) => JSON.parse(r.body).messageId as string));
      assert.equal(ids.size, MESSAGES, 'each message once');
      const failed = await sy.admin('GET', `/deliveries?sourceId=${slow.id}&status=failed`);
      assert.deepEqual(failed.body.deliveries, [], 'nothing failed because of the cap');
    });
  });
});
