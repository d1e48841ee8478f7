import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, sourceWithWebhooks } from '../helpers/webhooks.js';

/** More than the worker's 256 deliveries in flight, so without a per-origin limit A would take every slot. */
const A_MESSAGES = 300;
const B_MESSAGES = 20;

describe('a slow receiver does not hold up others', () => {
  let sy: TestSwitchyard;
  let slow: TestReceiver;
  let fast: TestReceiver;

  before(async () => {
    // A long timeout: the slow receiver's requests stay in flight for the whole test.
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'delivery-timeout-ms': '20000' });
    slow = await startReceiver();
    slow.reply = () => ({ hang: true });
    fast = await startReceiver();
  });
  after(async () => {
    slow?.release();
    await sy?.close();
    await slow?.close();
    await fast?.close();
  });

  const batch = (n: number, prefix: string) => ({
    batch: Array.from({ length: n }, (_, i) => ({ type: 'track', userId: 'u', event: 'E', messageId: `${prefix}-${i}` })),
  });

  it("delivers source B's messages while source A's receiver hangs, then drains A", async () => {
    const a = await sourceWithWebhooks(sy, [slow.url]);
    const b = await sourceWithWebhooks(sy, [fast.url]);
    assert.equal((await sy.send('/v1/batch', a.writeKey, batch(A_MESSAGES, 'a'))).status, 200);
    await slow.waitFor(1);
    assert.equal((await sy.send('/v1/batch', b.writeKey, batch(B_MESSAGES, 'b'))).status, 200);

    await fast.waitFor(B_MESSAGES, 15_000);
    assert.equal(slow.hanging(), slow.requests.length, 'every request to A is still unanswered');
    assert.ok(slow.requests.length <= 64, `A holds at most its per-origin share of 64 (${slow.requests.length} in flight)`);

    slow.release(200);
    await eventually(() => {
      const ids = new Set(slow.requests.map((r) => JSON.parse(r.body).messageId));
      return ids.size === A_MESSAGES ? ids : undefined;
    }, 60_000, `all ${A_MESSAGES} messages at A`);
    const succeeded = await eventually(async () => {
      const listed = await sy.admin('GET', `/deliveries?sourceId=${a.id}&status=succeeded&limit=1000`);
      return listed.body.deliveries.length === A_MESSAGES ? listed.body.deliveries : undefined;
    }, 30_000, "A's deliveries to succeed");
    assert.equal(succeeded.length, A_MESSAGES);
  });

  it("delivers source B's new messages at once while source A works through a large backlog to a slow receiver", async () => {
    const slowButWorking = await startReceiver();
    slowButWorking.reply = () => ({ status: 200, delayMs: 100 });
    try {
      const a = await sourceWithWebhooks(sy, [slowButWorking.url]);
      const b = await sourceWithWebhooks(sy, [fast.url]);
      // 64 in flight at 100 ms each: about 640 a second, so A's backlog lasts about 5 s.
      for (let n = 0; n < 3; n++) assert.equal((await sy.send('/v1/batch', a.writeKey, batch(1_000, `backlog-${n}`))).status, 200);
      await slowButWorking.waitFor(64);
      const before = fast.requests.length;
      await sy.send('/v1/batch', b.writeKey, batch(5, 'fresh'));
      await fast.waitFor(before + 5, 15_000);
      // Ordering, not wall-clock time (busy CI cores make any time limit flaky): B's messages must
      // overtake A's backlog, so when they have all arrived, A must still have hundreds to go.
      const aDone = slowButWorking.requests.length;
      assert.ok(aDone < 2_500, `B's messages waited behind A's backlog (${aDone} of A's 3,000 were sent first)`);
      // A's deliveries turned away meanwhile were deferred, not dropped.
      await eventually(() => {
        const ids = new Set(slowButWorking.requests.map((r) => JSON.parse(r.body).messageId));
        return ids.size === 3_000 ? ids : undefined;
      }, 45_000, "all 3,000 of A's messages at A");
    } finally {
      await slowButWorking.close();
    }
  });

  it('keeps delivering to healthy receivers while another is down', async () => {
    const down = await startReceiver();
    const deadUrl = down.url;
    await down.close(); // nothing listens there any more: connection refused
    const a = await sourceWithWebhooks(sy, [deadUrl]);
    const b = await sourceWithWebhooks(sy, [fast.url]);
    const before = fast.requests.length;
    await sy.send('/v1/batch', a.writeKey, batch(50, 'dead'));
    await sy.send('/v1/batch', b.writeKey, batch(5, 'alive'));
    await fast.waitFor(before + 5, 15_000);
    const pending = await sy.admin('GET', `/deliveries?sourceId=${a.id}&status=pending&limit=1000`);
    assert.ok(pending.body.deliveries.length > 0, 'the dead receiver is still being retried');
  });
});
