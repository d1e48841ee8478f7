import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { describeBrowser, launchChromium, openConsolePage, seriousAxeViolations } from '../helpers/browser.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, waitForDelivery } from '../helpers/webhooks.js';

/** With UPDATE_SCREENSHOTS=1 the test saves each page for docs/console.md; otherwise it writes nothing. */
const SCREENSHOT_DIR = process.env['UPDATE_SCREENSHOTS'] === '1' ? path.resolve(import.meta.dirname, '..', '..', '..', 'docs', 'console') : undefined;

async function screenshot(page: Page, name: string): Promise<void> {
  if (SCREENSHOT_DIR === undefined) return;
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

async function assertAccessible(page: Page, where: string): Promise<void> {
  const violations = await seriousAxeViolations(page);
  assert.deepEqual(violations, [], `axe-core found serious or critical violations on ${where}: ${JSON.stringify(violations, null, 2)}`);
}

describeBrowser('the web console in Chromium', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let source: { id: string; name: string; writeKey: string };
  let pageErrors: string[] = [];

  before(async () => {
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'retry-window-ms': '800' });
    receiver = await startReceiver();
    browser = await launchChromium();
    ({ context, page, pageErrors } = await openConsolePage(browser));
  });

  after(async () => {
    await context?.close();
    await browser?.close();
    await receiver?.close();
    await sy?.close();
  });

  it('serves the console with a Content-Security-Policy and compressed script', async () => {
    const response = await fetch(`${sy.url}/console`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const script = await fetch(`${sy.url}/console/assets/app.js`, { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(script.status, 200);
    assert.equal(script.headers.get('content-encoding'), 'gzip');
    assert.equal((await fetch(`${sy.url}/console/assets/nothing.js`)).status, 404);
  });

  it('refuses a wrong admin token and says so, then signs in from the keyboard', async () => {
    await page.goto(`${sy.url}/console`);
    await assertAccessible(page, 'the sign-in page');
    await screenshot(page, 'sign-in');
    await page.keyboard.press('Tab');
    await page.keyboard.type('not-the-token');
    await page.keyboard.press('Enter');
    await page.getByRole('alert').filter({ hasText: 'admin token is wrong' }).waitFor();
    assert.equal(await page.evaluate(() => (globalThis as any).sessionStorage.length), 0, 'a wrong token is not kept');

    await page.getByLabel('Admin token').fill(TEST_ADMIN_TOKEN);
    await page.getByLabel('Admin token').press('Enter');
    await page.getByRole('navigation', { name: 'Console pages' }).waitFor();
    assert.ok(!page.url().includes(TEST_ADMIN_TOKEN), 'the token is never in the URL');
  });

  it('creates a source and shows its write key', async () => {
    await page.getByRole('link', { name: 'Sources' }).click();
    await page.getByLabel('New source name').fill('shop');
    await page.getByRole('button', { name: 'Create source' }).click();
    await page.getByRole('status').filter({ hasText: 'Created source shop' }).waitFor();
    const listed = (await sy.admin('GET', '/sources')).body.sources.find((s: any) => s.name === 'shop');
    assert.ok(listed, 'the source exists in the API');
    source = listed;
    const row = page.locator(`tr[data-source-id="${source.id}"]`);
    assert.equal(await row.locator(`#key-${source.id}`).textContent(), source.writeKey);
    await assertAccessible(page, 'the sources page');
    await screenshot(page, 'sources');
  });

  it('shows the API validation error next to the receiver URL, then saves a real receiver and tests it', async () => {
    await page.goto(`${sy.url}/console#/webhooks?source=${source.id}`);
    const url = page.getByLabel('URL of receiver 1');
    await url.fill('ftp://example.com/hook');
    await page.getByRole('button', { name: 'Save destination' }).click();
    const fieldError = page.locator('#error-url-0');
    await fieldError.waitFor();
    assert.match((await fieldError.textContent()) ?? '', /settings\.webhooks\[0\]\.url must use http or https/);
    assert.equal(await url.getAttribute('aria-describedby'), 'error-url-0');

    await url.fill(receiver.url);
    await page.getByRole('button', { name: 'Add a header to receiver 1' }).click();
    await page.getByLabel('Header name').fill('X-Team');
    await page.getByLabel('Value').fill('console');
    await page.getByRole('button', { name: 'Add a header to receiver 1' }).click();
    await page.getByLabel('Header name').nth(1).fill('Authorization');
    await page.getByLabel('Value').nth(1).fill('Bearer from-the-console');
    await page.getByLabel(/Shared secret/).fill('s3cret-from-the-console');
    await page.getByRole('button', { name: 'Save destination' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    assert.equal(await page.getByLabel(/Shared secret/).inputValue(), '', 'the secret is not shown back');
    assert.equal(await page.getByRole('alert').count(), 0, 'no error is left on the page once saved');
    const stored = await sy.admin('GET', `/sources/${source.id}/destinations/webhooks`);
    assert.deepEqual(stored.body.settings.webhooks, [{ url: receiver.url, headers: { 'X-Team': 'console', Authorization: '********' } }]);
    assert.equal(stored.body.settings.sharedSecret, '********');

    // Saving again without retyping the secret keeps it.
    await page.getByRole('button', { name: 'Save destination' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();

    receiver.reply = () => ({ status: 202, body: 'hello from the receiver' });
    await page.getByRole('button', { name: 'Send a test message' }).click();
    const answers = page.getByRole('region', { name: 'Test message answers' });
    await answers.getByText('HTTP 202').waitFor();
    assert.match((await answers.textContent()) ?? '', /hello from the receiver/);
    const test = receiver.requests.at(-1)!;
    assert.equal(JSON.parse(test.body).event, 'Switchyard Test Message');
    assert.equal(test.headers['x-team'], 'console');
    assert.equal(test.headers['authorization'], 'Bearer from-the-console');
    assert.ok(typeof test.headers['x-signature'] === 'string', 'the test message is signed with the kept secret');
    receiver.reply = () => ({ status: 200 });

    // Read back, the credential header shows its mask; saved as it is, the stored value is kept.
    await page.reload();
    await page.getByRole('button', { name: 'Save destination' }).waitFor();
    assert.equal(await page.getByLabel('Value').nth(1).inputValue(), '********');
    assert.ok(!(await page.content()).includes('from-the-console'), 'the header value is not in the page');
    await page.getByText(/shown as \*{8}: left as it is, the stored value/).waitFor();
    await page.getByRole('button', { name: 'Save destination' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const kept = (await sy.store.getDestination(source.id, 'webhooks'))!.settings as any;
    assert.deepEqual(kept.webhooks[0].headers, { 'X-Team': 'console', Authorization: 'Bearer from-the-console' });
    await assertAccessible(page, 'the webhooks page');
    await screenshot(page, 'webhooks');
  });

  it('shows a track sent with the write key in the live debugger, with its JSON on click', async () => {
    await page.goto(`${sy.url}/console#/debugger?source=${source.id}`);
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor();
    const sentAt = Date.now();
    const sent = await sy.send('/v1/track', source.writeKey, { userId: 'ada', event: 'Order Completed', properties: { total: 42 } });
    assert.equal(sent.status, 200);
    const row = page.locator('.message-list button.message').filter({ hasText: 'Order Completed' });
    await row.waitFor();
    // Reported, not asserted: timing belongs to the bench (the issue asks for under 2 s).
    console.warn(`console test: the track showed in the live debugger ${Date.now() - sentAt} ms after the send`);
    await row.click();
    const detail = page.getByRole('region', { name: 'Selected message' });
    await detail.getByText('"total": 42').waitFor();

    // Filtering by status hides it; pausing holds new messages back until resumed.
    await page.getByLabel('Status').selectOption('rejected');
    assert.equal(await row.count(), 0);
    await page.getByLabel('Status').selectOption('');
    await page.getByRole('button', { name: 'Pause' }).click();
    await sy.send('/v1/track', source.writeKey, { userId: 'ada', event: 'Held Back' });
    await page.getByRole('status').filter({ hasText: 'Paused; 1 new message held' }).waitFor();
    assert.equal(await page.locator('button.message').filter({ hasText: 'Held Back' }).count(), 0);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.locator('button.message').filter({ hasText: 'Held Back' }).waitFor();
    await assertAccessible(page, 'the debugger page');
    await screenshot(page, 'debugger');
  });

  it('keeps up with a burst of 2,000 messages by rendering only the rows in view', async () => {
    // A source without destinations, so that the burst leaves the deliveries of the next test alone.
    const burst = await sy.createSource('burst');
    await page.goto(`${sy.url}/console#/debugger?source=${burst.id}`);
    await page.getByRole('status').filter({ hasText: 'Live' }).waitFor();
    for (let round = 0; round < 20; round++) {
      const batch = Array.from({ length: 100 }, (_, i) => ({ type: 'track', userId: 'load', event: `Burst ${round * 100 + i}` }));
      assert.equal((await sy.send('/v1/batch', burst.writeKey, { batch })).status, 200);
    }
    // Every message shows, unless the stream fell more than 1,000 behind and skipped some, which the page then says.
    await page.locator('.counts').filter({ hasText: /(2000 shown of 2000|skipped while catching up)/ }).waitFor();
    await page.locator('button.message').filter({ hasText: 'Burst 1999 ·' }).waitFor();
    const rendered = await page.locator('.message-list li').count();
    assert.ok(rendered > 0 && rendered <= 40, `rendered ${rendered} rows for 2,000 messages`);
    // The newest is on top; scrolling to the bottom renders the oldest, still a window.
    await page.locator('.message-list').evaluate((list: any) => {
      list.scrollTop = list.scrollHeight;
    });
    // The last row rendered is then the list's last (oldest) one.
    await page.waitForFunction(() => {
      const list = (globalThis as any).document.querySelector('.message-list ul');
      const last = list?.lastElementChild;
      return last !== null && last !== undefined && parseFloat(last.style.top) + parseFloat(last.style.height) >= parseFloat(list.style.height);
    });
    const oldest = page.locator('.message-list li').last();
    assert.match((await oldest.textContent()) ?? '', /Burst \d+ ·/);
    assert.ok((await page.locator('.message-list li').count()) <= 40);
    await sy.admin('DELETE', `/sources/${burst.id}`);
  });

  it('lists the delivery with its attempts, and retries failed deliveries one by one and all since a time', async () => {
    await eventually(async () => ((await listDeliveries(sy, source.id, 'succeeded')).length >= 2 ? true : undefined), 10_000, 'two deliveries to succeed');
    await page.goto(`${sy.url}/console#/deliveries?source=${source.id}`);
    const rows = page.locator('tr[data-delivery-id]');
    await rows.first().waitFor();
    const first = (await listDeliveries(sy, source.id)).at(-1);
    await page.getByRole('button', { name: `Show the attempts of delivery ${first.id}` }).click();
    const attempts = page.getByRole('region', { name: `Attempts of delivery ${first.id}` });
    await attempts.locator('tr.attempt').filter({ hasText: 'HTTP 200' }).waitFor();
    assert.match((await attempts.textContent()) ?? '', new RegExp(receiver.url.replace(/[/.]/g, '\\$&')));
    // The receiver's answer (test/helpers/receiver.ts answers text/plain "ok").
    await attempts.locator('tr.attempt summary').first().click();
    assert.match((await attempts.locator('tr.attempt').first().textContent()) ?? '', /text\/plain.*Body.*ok/s);
    await assertAccessible(page, 'the deliveries page');
    await screenshot(page, 'deliveries');

    // The receiver fails: both new deliveries give up once the short retry window ends.
    receiver.reply = () => ({ status: 500, body: 'down' });
    await sy.send('/v1/track', source.writeKey, { userId: 'ada', event: 'Will Fail One' });
    await sy.send('/v1/track', source.writeKey, { userId: 'ada', event: 'Will Fail Two' });
    const failed = await eventually(async () => {
      const list = await listDeliveries(sy, source.id, 'failed');
      return list.length === 2 ? list : undefined;
    }, 15_000, 'two failed deliveries');
    receiver.reply = () => ({ status: 200 });
    const before = receiver.requests.length;

    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: `Retry delivery ${failed[1].id}` }).click();
    await page.getByRole('status').filter({ hasText: `Delivery ${failed[1].id} is back in the queue` }).waitFor();
    await waitForDelivery(sy, failed[1].id, 'succeeded');
    assert.equal((await sy.admin('GET', `/deliveries/${failed[0].id}`)).body.status, 'failed', 'retrying one leaves the other');

    await page.getByRole('button', { name: 'Retry all failed since then' }).click();
    await page.getByRole('status').filter({ hasText: 'Put 1 failed delivery back in the queue' }).waitFor();
    await waitForDelivery(sy, failed[0].id, 'succeeded');
    assert.ok(receiver.requests.length >= before + 2);
    await page.getByRole('button', { name: 'Refresh', exact: true }).click();
    await page.getByText('No deliveries match.').waitFor();
  });

  it('charts the messages received and the delivery outcomes of the last hour', async () => {
    await page.getByRole('link', { name: 'Overview' }).click();
    // Four tracks were sent with the write key, and the burst's 2,000; two deliveries failed for good before their retries.
    await page.getByRole('heading', { name: 'Messages received: 2004' }).waitFor();
    const deliveries = page.getByRole('figure', { name: /Deliveries by outcome/ });
    assert.match((await deliveries.locator('.legend').textContent()) ?? '', /failed: 2/);
    assert.match((await page.getByRole('img', { name: /Messages received per minute/ }).getAttribute('aria-label')) ?? '', /: 2004 messages \(2004 accepted, 0 rejected/);
    await assertAccessible(page, 'the overview page');
    await screenshot(page, 'overview');
  });

  it('pages through deliveries, newest first', async () => {
    const paged = await sy.createSource('paged');
    assert.equal((await sy.admin('PUT', `/sources/${paged.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } })).status, 200);
    const batch = Array.from({ length: 101 }, (_, i) => ({ type: 'track', userId: 'pager', event: `Page ${i}` }));
    assert.equal((await sy.send('/v1/batch', paged.writeKey, { batch })).status, 200);
    const all = await listDeliveries(sy, paged.id);
    assert.equal(all.length, 101);
    await page.goto(`${sy.url}/console#/deliveries?source=${paged.id}`);
    await page.locator(`tr[data-delivery-id="${all[0].id}"]`).waitFor();
    assert.equal(await page.locator('tr[data-delivery-id]').count(), 100);
    await page.getByRole('button', { name: 'Older deliveries' }).click();
    await page.locator(`tr[data-delivery-id="${all[100].id}"]`).waitFor();
    assert.equal(await page.locator('tr[data-delivery-id]').count(), 1);
    await page.getByRole('button', { name: 'Newest deliveries' }).click();
    await page.locator(`tr[data-delivery-id="${all[0].id}"]`).waitFor();
    await sy.admin('DELETE', `/sources/${paged.id}`);
  });

  it('creates a regulation and lists it with its status per source', async () => {
    await page.getByRole('link', { name: 'Regulations' }).click();
    await page.getByLabel('Type').selectOption('SUPPRESS_ONLY');
    await page.getByLabel(/User ids/).fill('mallory, eve');
    await page.getByRole('button', { name: 'Create request' }).click();
    await page.getByRole('status').filter({ hasText: 'Created request' }).waitFor();
    const row = page.locator('tbody tr').filter({ hasText: 'SUPPRESS_ONLY' });
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', /shop: FINISHED/);
    await assertAccessible(page, 'the regulations page');
    await screenshot(page, 'regulations');
  });

  it('lists a request over many sources with its first 20 and the rest counted', async () => {
    const many = [];
    for (let i = 0; i < 24; i++) many.push(await sy.createSource(`many ${i}`));
    const created = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['trudy'] });
    assert.equal(created.status, 201);
    await page.getByRole('button', { name: 'Refresh' }).click();
    const row = page.locator('tbody tr').filter({ hasText: created.body.id });
    await row.waitFor();
    assert.equal(await row.locator('li').count(), 20);
    // shop, the sources of earlier tests and these 24: the rest counted.
    const { body } = await sy.admin('GET', `/regulations/${created.body.id}`);
    assert.match((await row.textContent()) ?? '', new RegExp(`and ${body.sources.length - 20} more \\(${body.sources.length} finished, 0 pending, 0 failed in all\\)`));
    for (const source of many) await sy.admin('DELETE', `/sources/${source.id}`);
  });

  it('renames, disables and deletes a source after a confirmation naming what is lost', async () => {
    await page.getByRole('link', { name: 'Sources' }).click();
    await page.getByRole('button', { name: 'Rename shop' }).click();
    await page.getByLabel('Name of shop').fill('store');
    await page.getByRole('button', { name: 'Save name' }).click();
    await page.getByRole('button', { name: 'Disable store' }).click();
    await page.getByRole('button', { name: 'Enable store' }).waitFor();
    assert.equal((await sy.admin('GET', `/sources/${source.id}`)).body.enabled, false);

    // From the keyboard: the confirmation takes the focus on its destructive button; Tab reaches "Keep it".
    await page.getByRole('button', { name: 'Delete store' }).focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('alertdialog');
    await dialog.waitFor();
    await page.waitForFunction(() => (globalThis as any).document.activeElement?.textContent === 'Delete store for good');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await dialog.waitFor({ state: 'detached' });
    assert.equal((await sy.admin('GET', `/sources/${source.id}`)).status, 200, 'keeping it deletes nothing');

    await page.getByRole('button', { name: 'Delete store' }).click();
    assert.match((await dialog.textContent()) ?? '', /stored messages, deliveries/);
    await assertAccessible(page, 'the delete confirmation');
    await dialog.getByRole('button', { name: 'Delete store for good' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted store' }).waitFor();
    assert.equal((await sy.admin('GET', `/sources/${source.id}`)).status, 404);
  });

  it('raised no script error and no Content-Security-Policy refusal in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
