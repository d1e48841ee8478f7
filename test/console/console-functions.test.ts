import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, waitForDelivery } from '../helpers/webhooks.js';


/** The second line does not compile. */
const BROKEN_CODE = `async function onTrack(event, settings) {
  return event +;
}
`;

/** Posts each track to settings.url with the API key; no onIdentify, so an identify fails with EventNotSupported. */
const CODE_V1 = `async function onTrack(event, settings) {
  const res = await fetch(settings.url + '/track', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + settings.apiKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ event: event.event, messageId: event.messageId }),
  });
  console.log('posted', event.event, 'got', res.status);
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

const CODE_V2 = CODE_V1.replace("console.log('posted'", "console.log('v2 posted'");

const API_KEY = 'sk_test_console_1234';

async function fillCode(page: Page, code: string): Promise<void> {
  await page.getByLabel('Code', { exact: true }).fill(code);
}

describeBrowser('the console: function destinations', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let shop: { id: string; writeKey: string };
  let functionId: string;

  before(async () => {
    // Loopback receivers allowed (FAST_RETRIES), so a function's fetch may reach the local receiver.
    // A small heap per isolate, as a busy test machine can spare.
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'transform-memory-mb': '32' });
    receiver = await startReceiver();
    shop = await sy.createSource('shop');
    // A stored message for "Run on the last 20 messages" (no destination yet, so no delivery).
    assert.equal((await sy.send('/v1/track', shop.writeKey, { userId: 'ada', event: 'Signed Up' })).status, 200);
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  it("opens from the source's row and shows the API refusing code that does not compile beside the editor, with its line and column", async () => {
    await page.getByRole('link', { name: 'Sources', exact: true }).click();
    await assertAccessible(page, 'the sources page with its Functions links');
    await page.locator(`tr[data-source-id="${shop.id}"]`).getByRole('link', { name: 'Functions of shop' }).click();
    await page.getByText('shop has no function destinations yet.').waitFor();
    assert.match(page.url(), new RegExp(`#/functions\\?source=${shop.id}$`));
    await page.getByRole('button', { name: 'New function destination' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Chat');
    await fillCode(page, BROKEN_CODE);
    await page.getByRole('button', { name: 'Create function destination' }).click();

    const error = page.locator('#code-error');
    await error.waitFor();
    const text = (await error.textContent()) ?? '';
    assert.match(text, /invalid_function/);
    assert.match(text, /line 2, column \d+/);
    const editor = page.getByLabel('Code', { exact: true });
    assert.equal(await editor.getAttribute('aria-invalid'), 'true');
    assert.equal(await editor.getAttribute('aria-describedby'), 'code-error');
    await page.getByRole('button', { name: /^Go to line 2, column \d+$/ }).waitFor();
    await assertAccessible(page, 'the function editor with an error');
    await screenshot(page, 'function-error');
    assert.deepEqual((await sy.admin('GET', `/sources/${shop.id}/destinations/functions`)).body.functions, [], 'nothing was stored');
  });

  it('tests the code and settings on sample events and on the last messages: outcome, each fetch and the logged lines; stores nothing', async () => {
    await fillCode(page, CODE_V1);
    await page.getByRole('button', { name: 'Add a setting' }).click();
    await page.getByLabel('Key of setting 1').fill('url');
    await page.getByLabel('Value of setting 1').fill(receiver.url);
    await page.getByRole('button', { name: 'Add a setting' }).click();
    await page.getByLabel('Key of setting 2').fill('apiKey');
    await page.getByLabel('Value of setting 2').fill(API_KEY);

    const panel = page.getByRole('region', { name: 'Test the function' });
    await panel.getByRole('button', { name: 'Run on the sample events' }).click();
    await panel.getByRole('status').filter({ hasText: 'Ran on 2 events' }).waitFor();
    assert.match((await panel.getByRole('status').textContent()) ?? '', /1 delivered, 0 to retry, 1 failed; 1 fetch made\. Nothing was stored\./);
    const results = panel.getByRole('list', { name: 'Function test results' }).locator('li.test-result');
    assert.equal(await results.count(), 2);
    const track = (await results.filter({ hasText: '"event": "Order Completed"' }).textContent()) ?? '';
    assert.ok(track.includes(`POST ${receiver.url}/track → HTTP 200 in`), track);
    assert.match(track, /Outcomedelivered/);
    assert.match(track, /posted Order Completed got 200/);
    // The sample has a messageId but no times: the run filled them as ingest would, and says so.
    assert.match(track, /Filled as ingest would: (\w+, )*receivedAt(, \w+)*\./);
    assert.doesNotMatch(track, /Filled as ingest would: [^.]*messageId/);
    const identify = (await results.filter({ hasText: '"type": "identify"' }).textContent()) ?? '';
    assert.match(identify, /Outcomefailed/);
    assert.match(identify, /EventNotSupported: /);
    assert.match(identify, /No fetch made\./);
    // The fetch was real, with the settings typed in the form.
    const [posted] = await receiver.waitFor(1);
    assert.equal(posted!.path, '/hook/track');
    assert.equal(posted!.headers['authorization'], `Bearer ${API_KEY}`);
    await assertAccessible(page, 'the function test results');

    await panel.getByRole('button', { name: 'Run on the last 20 messages of shop' }).click();
    await panel.getByRole('status').filter({ hasText: 'Ran on 1 event: 1 delivered' }).waitFor();
    assert.match((await results.first().textContent()) ?? '', /posted Signed Up got 200/);

    assert.deepEqual((await sy.admin('GET', `/sources/${shop.id}/destinations/functions`)).body.functions, [], 'a test stores no function');
    assert.deepEqual(await listDeliveries(sy, shop.id), [], 'a test makes no delivery');
  });

  it('creates it; the secret reads back masked, and saving new code as version 2 keeps it', async () => {
    await page.getByRole('button', { name: 'Create function destination' }).click();
    await page.getByRole('status').filter({ hasText: 'Created function destination Chat (version 1).' }).waitFor();
    const [stored] = (await sy.admin('GET', `/sources/${shop.id}/destinations/functions`)).body.functions;
    functionId = stored.id;
    assert.equal(stored.name, 'Chat');
    assert.equal(stored.version, 1);
    assert.equal(stored.enabled, true);
    assert.deepEqual(stored.settings, { url: receiver.url, apiKey: '********' });
    const row = page.locator(`tr[data-function-id="${functionId}"]`);
    assert.match((await row.textContent()) ?? '', /Chat.*Enabledv1/);

    // The editor reads it back: the secret shows as the mask, its key fixed, with a note that it is kept.
    await page.getByRole('heading', { name: 'Chat (version 1)' }).waitFor();
    const secretValue = page.getByLabel('Value of setting 2');
    assert.equal(await secretValue.inputValue(), '********');
    assert.equal(await page.getByLabel('Key of setting 2').getAttribute('readonly'), '');
    assert.match((await page.locator(`#${(await secretValue.getAttribute('aria-describedby'))!}`).textContent()) ?? '', /kept as it is while the value reads \*{8}/);
    assert.equal(await page.getByRole('button', { name: 'Save changes' }).count(), 1, 'unchanged code is no new version');
    // As JSON and back: the mask stays the mask.
    await page.getByRole('button', { name: 'Edit settings as JSON' }).click();
    assert.deepEqual(JSON.parse(await page.getByLabel('Settings (JSON)').inputValue()), { url: receiver.url, apiKey: '********' });
    await page.getByRole('button', { name: 'Edit settings as rows' }).click();
    assert.equal(await page.getByLabel('Value of setting 2').inputValue(), '********');
    await assertAccessible(page, 'the function editor with a masked secret');

    await fillCode(page, CODE_V2);
    await page.getByRole('button', { name: 'Save as version 2' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved Chat (version 2).' }).waitFor();
    await row.filter({ hasText: 'v2' }).waitFor();
    const detail = (await sy.admin('GET', `/sources/${shop.id}/destinations/functions/${functionId}`)).body;
    assert.equal(detail.version, 2);
    assert.equal(detail.code, CODE_V2);
    assert.deepEqual(detail.settings, { url: receiver.url, apiKey: '********' });

    // A test of the saved function gets the mask, not the stored key: the page says so.
    const panel = page.getByRole('region', { name: 'Test the function' });
    await panel.getByRole('button', { name: 'Run on the sample events' }).click();
    await panel.getByRole('status').filter({ hasText: 'Ran on 2 events' }).waitFor();
    assert.equal(receiver.requests.at(-1)!.headers['authorization'], 'Bearer ********');
    await screenshot(page, 'functions');
  });

  it('disables and enables it from the list', async () => {
    const row = page.locator(`tr[data-function-id="${functionId}"]`);
    await row.getByRole('button', { name: 'Disable Chat' }).click();
    await page.getByRole('status').filter({ hasText: 'Disabled Chat.' }).waitFor();
    await row.filter({ hasText: 'Disabled' }).waitFor();
    assert.equal((await sy.admin('GET', `/sources/${shop.id}/destinations/functions/${functionId}`)).body.enabled, false);
    await row.getByRole('button', { name: 'Enable Chat' }).click();
    await page.getByRole('status').filter({ hasText: 'Enabled Chat.' }).waitFor();
    assert.equal((await sy.admin('GET', `/sources/${shop.id}/destinations/functions/${functionId}`)).body.enabled, true);
  });

  it("delivers a track through it; the deliveries page names the function and shows the attempt's fetches and logged lines", async () => {
    const before = receiver.requests.length;
    assert.equal((await sy.send('/v1/track', shop.writeKey, { userId: 'bo', event: 'Order Completed', messageId: 'm-console-fn' })).status, 200);
    const requests = await receiver.waitFor(before + 1);
    // The key typed before version 1 was kept through the save of version 2.
    assert.equal(requests[before]!.headers['authorization'], `Bearer ${API_KEY}`);
    const [delivery] = await eventually(async () => {
      const found = await listDeliveries(sy, shop.id);
      return found.length > 0 ? found : undefined;
    });
    assert.equal(delivery.functionId, functionId);
    await waitForDelivery(sy, delivery.id, 'succeeded');

    await page.getByRole('link', { name: 'Deliveries', exact: true }).click();
    const row = page.locator(`tr[data-delivery-id="${delivery.id}"]`);
    // The row shows the function's id first, then its name once the source's functions are read.
    await row.locator('td').nth(2).filter({ hasText: 'Function Chat' }).waitFor();
    assert.equal(await row.locator('td').nth(2).textContent(), `Function Chat${functionId}`);
    await row.getByRole('button', { name: `Show the attempts of delivery ${delivery.id}` }).click();
    const attempts = page.getByRole('region', { name: `Attempts of delivery ${delivery.id}` });
    const attempt = attempts.locator('tr.attempt');
    await attempt.filter({ hasText: 'Chat v2' }).waitFor();
    const text = (await attempt.textContent()) ?? '';
    assert.ok(text.includes(`Chat v2function:${functionId}`), text);
    assert.match(text, /delivered/);
    assert.ok(text.includes(`POST ${receiver.url}/track → HTTP 200 in`), text);
    await attempt.getByText('Logged lines (1)').click();
    await attempt.getByText('v2 posted Order Completed got 200').waitFor();
    assert.match((await attempts.textContent()) ?? '', /To Function Chat/);
    await assertAccessible(page, 'a function delivery and its attempt');
    await screenshot(page, 'deliveries-function');
  });

  it("deletes a secret when its row is removed (left out, it would be kept)", async () => {
    await page.goto(`${sy.url}/console#/functions?source=${shop.id}&id=${functionId}`);
    await page.getByRole('heading', { name: 'Chat (version 2)' }).waitFor();
    await page.getByRole('button', { name: 'Remove setting apiKey' }).click();
    await page.getByText('Deleted on save: apiKey.').waitFor();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved Chat (version 2).' }).waitFor();
    assert.deepEqual((await sy.admin('GET', `/sources/${shop.id}/destinations/functions/${functionId}`)).body.settings, { url: receiver.url });
  });

  it('fits a 390 px wide screen without scrolling the page sideways', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${sy.url}/console#/functions?source=${shop.id}&id=${functionId}`);
      await page.getByRole('heading', { name: 'Chat (version 2)' }).waitFor();
      await page.getByRole('region', { name: 'Test the function' }).getByRole('button', { name: 'Run on the sample events' }).click();
      await page.getByRole('list', { name: 'Function test results' }).waitFor();
      const widths = await page.evaluate(() => {
        const root = (globalThis as any).document.documentElement;
        // What sticks out of the view, for the message (a table inside .scroll-x scrolls in its own box, not the page).
        const wide = [...root.querySelectorAll('*')].filter((el: any) => el.closest('.scroll-x') === null && el.getBoundingClientRect().right > root.clientWidth + 0.5);
        return { page: root.scrollWidth, view: root.clientWidth, wide: wide.slice(0, 5).map((el: any) => `${el.tagName}.${el.className}: ${el.textContent.slice(0, 40)}`) };
      });
      assert.ok(widths.page <= widths.view, `the page is ${widths.page} px wide in a ${widths.view} px view: ${widths.wide.join(' | ')}`);
      await assertAccessible(page, 'the functions page at 390 px');
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it('deletes it after asking', async () => {
    const row = page.locator(`tr[data-function-id="${functionId}"]`);
    await row.getByRole('button', { name: 'Delete Chat' }).click();
    await page.getByRole('button', { name: 'Delete Chat for good' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted function destination Chat.' }).waitFor();
    await page.getByText('shop has no function destinations yet.').waitFor();
    assert.equal((await sy.admin('GET', `/sources/${shop.id}/destinations/functions/${functionId}`)).status, 404);
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
