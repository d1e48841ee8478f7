import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { listDeliveries, sourceWithWebhooks, waitForDelivery } from '../helpers/webhooks.js';

/**
 * Retries ten minutes apart and a window of an hour: a delivery whose first
 * attempt failed stays pending far longer than this test runs, unless
 * "Retry now" makes it due.
 */
const SLOW_RETRIES = { 'allow-private-receivers': 'true', 'retry-base-ms': '600000', 'retry-max-delay-ms': '600000', 'retry-window-ms': '3600000' };

describeBrowser('the console: retry now on a delivery', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard(SLOW_RETRIES);
    receiver = await startReceiver();
    source = await sourceWithWebhooks(sy, [receiver.url]);
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  it('makes a pending delivery waiting for its next attempt due at once, and shows it succeed', async () => {
    receiver.reply = () => ({ status: 503, body: 'busy' });
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'ada', event: 'Waits For Retry' })).status, 200);
    const waiting = await eventually(async () => {
      const [delivery] = await listDeliveries(sy, source.id);
      return delivery?.status === 'pending' && delivery.attemptCount === 1 && delivery.nextAttemptAt !== undefined ? delivery : undefined;
    }, 10_000, 'the first attempt to fail and the delivery to wait');
    assert.ok(Date.parse(waiting.nextAttemptAt) > Date.now() + 60_000, `the next attempt is minutes away (${waiting.nextAttemptAt})`);

    await page.goto(`${sy.url}/console#/deliveries?source=${source.id}&delivery=${waiting.id}`);
    const panel = page.getByRole('region', { name: `Attempts of delivery ${waiting.id}` });
    await panel.locator('tr.attempt').filter({ hasText: 'HTTP 503' }).waitFor();
    assert.match((await panel.textContent()) ?? '', /pending · next attempt/);
    await assertAccessible(page, 'a pending delivery with its Retry now button');

    receiver.reply = () => ({ status: 200, body: 'ok' });
    await panel.getByRole('button', { name: 'Retry now' }).click();
    await panel.getByRole('status').filter({ hasText: `Delivery ${waiting.id} is due now` }).waitFor();
    const done = await waitForDelivery(sy, waiting.id, 'succeeded');
    assert.equal(done.attempts.length, 2);
    assert.equal(receiver.requests.length, 2);

    await panel.getByRole('button', { name: 'Refresh attempts' }).click();
    await panel.locator('tr.attempt').filter({ hasText: 'HTTP 200' }).waitFor();
    assert.equal(await panel.getByRole('button', { name: /^Retry/ }).count(), 0, 'a succeeded delivery has nothing to retry');
  });

  it('puts a failed delivery back in the queue from its view', async () => {
    // A 400 is not retried: the delivery fails at once.
    receiver.reply = () => ({ status: 400, body: 'no' });
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'ada', event: 'Fails For Good' })).status, 200);
    const failed = await eventually(async () => (await listDeliveries(sy, source.id, 'failed'))[0], 10_000, 'a failed delivery');

    await page.goto(`${sy.url}/console#/deliveries?source=${source.id}&delivery=${failed.id}`);
    const panel = page.getByRole('region', { name: `Attempts of delivery ${failed.id}` });
    await panel.locator('tr.attempt').filter({ hasText: 'HTTP 400' }).waitFor();
    assert.equal(await panel.getByRole('button', { name: 'Retry now' }).count(), 0);

    receiver.reply = () => ({ status: 200 });
    await panel.getByRole('button', { name: 'Retry', exact: true }).click();
    await panel.getByRole('status').filter({ hasText: `Delivery ${failed.id} is back in the queue` }).waitFor();
    await waitForDelivery(sy, failed.id, 'succeeded');
    // The list beside it is refreshed too: the delivery is no longer failed there.
    await page.locator(`tr[data-delivery-id="${failed.id}"] .badge`).filter({ hasText: 'succeeded' }).or(page.locator(`tr[data-delivery-id="${failed.id}"] .badge`).filter({ hasText: 'pending' })).first().waitFor();
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
