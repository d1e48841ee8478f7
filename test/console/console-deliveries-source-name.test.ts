import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries } from '../helpers/webhooks.js';

describeBrowser('the console: deliveries name their source', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  const sources: Array<{ id: string; writeKey: string }> = [];

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    for (const name of ['web shop', 'ios app']) {
      const source = await sy.createSource(name);
      assert.equal((await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } })).status, 200);
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', messageId: `m-${name.replace(' ', '-')}`, event: 'Order Completed' })).status, 200);
      sources.push(source);
    }
    for (const source of sources) await eventually(async () => ((await listDeliveries(sy, source.id)).length === 1 ? true : undefined), 10_000, 'a delivery per source');
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  it('shows each delivery with the name of its source and its id', async () => {
    await page.getByRole('link', { name: 'Deliveries' }).click();
    const rows = page.locator('tr[data-delivery-id]');
    await rows.nth(1).waitFor();
    const [web, ios] = sources;
    const cellOf = async (messageId: string): Promise<string> => (await rows.filter({ hasText: messageId }).locator('td').nth(1).textContent()) ?? '';
    assert.equal(await cellOf('m-web-shop'), `web shop${web!.id}`);
    assert.equal(await cellOf('m-ios-app'), `ios app${ios!.id}`);
    await assertAccessible(page, 'the deliveries page with source names');
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
