import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries } from '../helpers/webhooks.js';

describeBrowser('the console: deliveries by user and messageId, with their message, linked with the debugger', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };
  /** Delivery ids by messageId. */
  const deliveryOf = new Map<string, { id: number; messageSeq: number }>();
  const rows = (): ReturnType<Page['locator']> => page.locator('tr[data-delivery-id]');
  /** The cells of the Message column, wherever it is among the others. */
  const messageCells = async (): Promise<ReturnType<Page['locator']>> => {
    const headers = await page.locator('table thead th').allTextContents();
    return rows().locator(`td:nth-child(${headers.indexOf('Message') + 1})`);
  };
  const shownMessageIds = async (): Promise<string[]> => (await (await messageCells()).locator('code').allTextContents()).sort();

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    source = await sy.createSource('web shop');
    assert.equal((await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } })).status, 200);
    for (const [route, body] of [
      ['/v1/track', { userId: 'ada', messageId: 'web-1', event: 'Order Completed', properties: { total: 42 } }],
      ['/v1/page', { anonymousId: 'anon-7', messageId: 'web-2', name: 'Home' }],
      ['/v1/track', { userId: 'bob', messageId: 'web-3', event: 'Signed In' }],
    ] as const) {
      assert.equal((await sy.send(route, source.writeKey, body)).status, 200);
    }
    const listed = await eventually(async () => {
      const all = await listDeliveries(sy, source.id, 'succeeded');
      return all.length === 3 ? all : undefined;
    }, 10_000, 'three deliveries');
    for (const delivery of listed) deliveryOf.set(delivery.messageId, delivery);
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  it("shows each delivery's message type, event and user", async () => {
    await page.getByRole('link', { name: 'Deliveries' }).click();
    await rows().nth(2).waitFor();
    const messageCell = async (messageId: string): Promise<string> =>
      (await (await messageCells()).filter({ hasText: messageId }).innerText()).replace(/\s+/g, ' ').trim();
    // The button's name ends with the delivery it opens, for screen readers (visually hidden).
    const of = (messageId: string): string => `(the message of delivery ${deliveryOf.get(messageId)!.id})`;
    assert.equal(await messageCell('web-1'), `track · Order Completed ${of('web-1')} user ada web-1`);
    assert.equal(await messageCell('web-2'), `page ${of('web-2')} anonymous anon-7 web-2`);
    assert.equal(await messageCell('web-3'), `track · Signed In ${of('web-3')} user bob web-3`);
  });

  it('searches by user id and by messageId, and says when nothing matches', async () => {
    const search = page.getByRole('search', { name: 'Search deliveries' });
    await search.getByLabel('User id').fill('ada');
    await search.getByRole('button', { name: 'Search', exact: true }).click();
    await page.waitForURL(/userId=ada/);
    await eventually(async () => ((await rows().count()) === 1 ? true : undefined), 5_000, 'one row for ada');
    assert.deepEqual(await shownMessageIds(), ['web-1']);
    await assertAccessible(page, 'the deliveries page searched by user');

    await search.getByRole('button', { name: 'Clear search' }).click();
    await eventually(async () => ((await rows().count()) === 3 ? true : undefined), 5_000, 'every row again');
    assert.equal(await search.getByLabel('User id').inputValue(), '');

    await search.getByLabel('messageId').fill('web-2');
    await search.getByRole('button', { name: 'Search', exact: true }).click();
    await eventually(async () => ((await rows().count()) === 1 ? true : undefined), 5_000, 'one row for web-2');
    assert.deepEqual(await shownMessageIds(), ['web-2']);

    await search.getByLabel('messageId').fill('');
    await search.getByLabel('User id').fill('ADA');
    await search.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByText('No deliveries match: none of a message with userId ADA').waitFor();
    assert.equal(await rows().count(), 0);
  });

  it("shows the message's payload on click, and opens it in the debugger", async () => {
    await page.goto(`${sy.url}/console#/deliveries?source=${source.id}`);
    const { id, messageSeq } = deliveryOf.get('web-1')!;
    await page.getByRole('button', { name: `track · Order Completed (the message of delivery ${id})` }).click();
    const panel = page.getByRole('region', { name: `Message of delivery ${id}` });
    const payload = panel.getByLabel(`The message of delivery ${id}, as stored`);
    await payload.waitFor();
    const shown = JSON.parse((await payload.textContent()) ?? '') as Record<string, unknown>;
    assert.equal(shown['messageId'], 'web-1');
    assert.deepEqual(shown['properties'], { total: 42 });
    // The attempts come with it, as before.
    await page.getByRole('region', { name: `Attempts of delivery ${id}` }).locator('tr.attempt').first().waitFor();
    await assertAccessible(page, "a delivery's message and attempts");
    await screenshot(page, 'deliveries-message');

    await panel.getByRole('link', { name: `Open message ${messageSeq} in the live debugger` }).click();
    const detail = page.getByRole('region', { name: 'Selected message' });
    await detail.getByRole('heading', { name: `Message ${messageSeq}: track, accepted` }).waitFor();
    assert.match((await detail.locator('pre.json').textContent()) ?? '', /"messageId": "web-1"/);
    assert.equal(await page.locator(`.message-list button[data-seq="${messageSeq}"][aria-pressed="true"]`).count(), 1, 'its row in the list is the selected one');
    await assertAccessible(page, 'the debugger opened on a delivery message');
  });

  it("links a debugger message to its deliveries and to its user's", async () => {
    const { messageSeq } = deliveryOf.get('web-3')!;
    await page.goto(`${sy.url}/console#/debugger?source=${source.id}&seq=${messageSeq}`);
    const detail = page.getByRole('region', { name: 'Selected message' });
    await detail.getByRole('link', { name: 'Deliveries of this message' }).click();
    await page.waitForURL(/#\/deliveries\?.*messageId=web-3/);
    await eventually(async () => ((await rows().count()) === 1 ? true : undefined), 5_000, 'the one delivery of web-3');
    assert.deepEqual(await shownMessageIds(), ['web-3']);
    assert.equal(await page.getByRole('search', { name: 'Search deliveries' }).getByLabel('messageId').inputValue(), 'web-3');

    await page.goto(`${sy.url}/console#/debugger?source=${source.id}&seq=${messageSeq}`);
    await detail.getByRole('link', { name: 'Every delivery of user bob' }).click();
    await page.waitForURL(/#\/deliveries\?userId=bob/);
    await eventually(async () => ((await rows().count()) === 1 ? true : undefined), 5_000, "bob's one delivery");
    assert.deepEqual(await shownMessageIds(), ['web-3']);
  });

  it('says so when a linked message is not in the source', async () => {
    await page.goto(`${sy.url}/console#/debugger?source=${source.id}&seq=999999`);
    await page.getByRole('region', { name: 'Selected message' }).getByRole('alert').filter({ hasText: 'no message 999999' }).waitFor();
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
