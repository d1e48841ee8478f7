import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES } from '../helpers/webhooks.js';

/** Drops pings, fails on "Broken", logs and reshapes the rest. */
const CODE_V1 = `export function transformEvent(event, metadata) {
  if (event.event === 'Internal Ping') return null;
  if (event.event === 'Broken') throw new Error('cannot handle Broken');
  log('saw ' + event.event);
  log('user ' + event.userId);
  event.properties = { ...event.properties, plan: 'PRO' };
  return event;
}
`;

/** The same, one version on: the detail names the version that ran. */
const CODE_V2 = CODE_V1.replace("log('user ' + event.userId);", "log('v2 for ' + event.userId);");

describeBrowser('the console: what a transformation did, in the debugger', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let shop: { id: string; writeKey: string };
  let transformationId: string;

  /** Waits until the transform stage has recorded a run on each of the source's newest `count` messages. */
  const transformed = (count: number) =>
    eventually(async () => {
      const { messages } = (await sy.admin('GET', `/sources/${shop.id}/debugger?limit=${count}`)).body as { messages: Array<{ transformation?: unknown }> };
      return messages.length === count && messages.every((m) => m.transformation !== undefined) ? messages : undefined;
    }, 10_000, 'the transformation runs recorded');

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    shop = await sy.createSource('shop');
    const created = await sy.admin('POST', '/transformations', { name: 'shop cleanup', code: CODE_V1 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    transformationId = created.body.id;
    const put = await sy.admin('PUT', `/sources/${shop.id}/destinations/webhooks`, {
      settings: { webhooks: [{ url: receiver.url }], transformation: { id: transformationId, version: 1 } },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const batch = [
      { type: 'track', userId: 'ann', event: 'Order Completed', properties: { revenue: 12 } },
      { type: 'track', userId: 'ann', event: 'Internal Ping' },
      { type: 'track', userId: 'ann', event: 'Broken' },
    ];
    assert.equal((await sy.send('/v1/batch', shop.writeKey, { batch })).status, 200);
    await transformed(3);
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  const detail = () => page.getByRole('region', { name: 'Selected message' });
  const open = async (summary: string): Promise<void> => {
    await page.getByRole('region', { name: 'Messages, newest first' }).getByRole('button').filter({ hasText: summary }).click();
  };

  it('shows the version that ran on a delivered message and the lines it logged', async () => {
    await page.getByRole('link', { name: 'Live debugger' }).click();
    await page.getByRole('combobox', { name: /^Source/ }).selectOption(shop.id);
    await open('Order Completed');
    const run = detail().getByRole('region', { name: 'Transformation shop cleanup v1' });
    await run.waitFor();
    assert.equal(await run.getByRole('link', { name: 'shop cleanup v1' }).getAttribute('href'), `#/transformations?id=${transformationId}`);
    assert.match((await run.textContent()) ?? '', /It ran; the delivery carries its output/);
    assert.equal(await run.locator('pre.logs').textContent(), 'saw Order Completed\nuser ann');
    assert.match((await detail().locator('h2').textContent()) ?? '', /track, accepted/);
    await assertAccessible(page, 'the debugger with a transformed message');
    await screenshot(page, 'debugger-transformation');
  });

  it('shows a drop with its reason', async () => {
    await open('Internal Ping');
    const run = detail().getByRole('region', { name: 'Transformation shop cleanup v1' });
    await run.getByText('It dropped the message').waitFor();
    assert.match((await detail().locator('h2').textContent()) ?? '', /track, filtered/);
    assert.match((await detail().textContent()) ?? '', /Reason: transformation "shop cleanup" v1 dropped it/);
    assert.equal(await run.getByText('It logged nothing.').count(), 1);
  });

  it('shows an error with its reason', async () => {
    await open('Broken');
    const run = detail().getByRole('region', { name: 'Transformation shop cleanup v1' });
    await run.getByText('It failed: the message was not delivered').waitFor();
    assert.match((await detail().locator('h2').textContent()) ?? '', /track, failed/);
    assert.match((await detail().textContent()) ?? '', /Reason: transformation "shop cleanup" v1: .*cannot handle Broken/);
  });

  it('shows the run of a message that arrived live, once the transform stage recorded it', async () => {
    const v2 = await sy.admin('PUT', `/transformations/${transformationId}`, { code: CODE_V2 });
    assert.equal(v2.status, 200, JSON.stringify(v2.body));
    assert.equal(
      (await sy.admin('PUT', `/sources/${shop.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }], transformation: { id: transformationId } } })).status,
      200,
    );
    assert.equal((await sy.send('/v1/track', shop.writeKey, { userId: 'bea', event: 'Signed Up' })).status, 200);
    await transformed(1);
    await open('Signed Up');
    const run = detail().getByRole('region', { name: 'Transformation shop cleanup v2' });
    await run.waitFor();
    assert.equal(await run.locator('pre.logs').textContent(), 'saw Signed Up\nv2 for bea');

    // A drop recorded after the message arrived: the row's status follows the detail.
    assert.equal((await sy.send('/v1/track', shop.writeKey, { userId: 'bea', event: 'Internal Ping' })).status, 200);
    await transformed(1);
    await open('Internal Ping · user bea');
    await detail().getByRole('region', { name: 'Transformation shop cleanup v2' }).getByText('It dropped the message').waitFor();
    const row = page.getByRole('region', { name: 'Messages, newest first' }).getByRole('button').filter({ hasText: 'Internal Ping · user bea' });
    await row.locator('.badge.filtered').waitFor();
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
