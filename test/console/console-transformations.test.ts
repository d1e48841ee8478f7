import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries } from '../helpers/webhooks.js';

/** The second line does not compile. */
const BROKEN_CODE = `export function transformEvent(event, metadata) {
  return event +;
}
`;

/** Drops pings, fails on "Broken", logs and reshapes the rest. */
const CODE_V1 = `export function transformEvent(event, metadata) {
  if (event.event === 'Internal Ping') return null;
  if (event.event === 'Broken') throw new Error('cannot handle Broken');
  log('saw ' + event.event);
  event.properties = { ...event.properties, plan: 'PRO' };
  return event;
}
`;

const CODE_V2 = CODE_V1.replace("plan: 'PRO'", "plan: 'PRO', version: 2");

async function fillCode(page: Page, code: string): Promise<void> {
  await page.getByLabel('Code', { exact: true }).fill(code);
}

describeBrowser('the console: transformations', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let samples: { id: string; writeKey: string };
  let shop: { id: string; writeKey: string };
  let transformationId: string;

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    samples = await sy.createSource('samples');
    shop = await sy.createSource('shop');
    // A destination with both secrets, so attaching is seen to keep them.
    const put = await sy.admin('PUT', `/sources/${shop.id}/destinations/webhooks`, {
      settings: { webhooks: [{ url: receiver.url }], sharedSecret: 'shop-secret', standardWebhooks: {} },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  it('shows the API refusing code that does not compile beside the editor, with its line and column', async () => {
    await page.getByRole('link', { name: 'Transformations' }).click();
    await page.getByText('No transformations yet.').waitFor();
    await page.getByRole('button', { name: 'New transformation' }).click();
    await page.getByLabel('Name').fill('shop cleanup');
    await fillCode(page, BROKEN_CODE);
    await page.getByRole('button', { name: 'Create transformation' }).click();

    const error = page.locator('#code-error');
    await error.waitFor();
    const text = (await error.textContent()) ?? '';
    assert.match(text, /invalid_transformation/);
    const at = /line (\d+), column (\d+)/.exec(text);
    assert.ok(at !== null, `the message names line and column: ${text}`);
    assert.equal(at[1], '2');
    const editor = page.getByLabel('Code', { exact: true });
    assert.equal(await editor.getAttribute('aria-describedby'), 'code-error');
    assert.equal(await editor.getAttribute('aria-invalid'), 'true');
    await assertAccessible(page, 'the transformation editor with an error');
    await screenshot(page, 'transformation-error');

    // "Go to line 2, column N" puts the cursor there.
    await page.getByRole('button', { name: `Go to line ${at[1]}, column ${at[2]}` }).click();
    const cursor = await editor.evaluate((area: any) => {
      const before = String(area.value).slice(0, area.selectionStart).split('\n');
      return { focused: (globalThis as any).document.activeElement === area, line: before.length, column: String(before.at(-1)).length + 1 };
    });
    assert.deepEqual(cursor, { focused: true, line: 2, column: Math.min(Number(at[2]), BROKEN_CODE.split('\n')[1]!.length + 1) });
    assert.deepEqual((await sy.admin('GET', '/transformations')).body.transformations, [], 'nothing was stored');
  });

  it('creates the transformation, saves a second version and shows each version', async () => {
    await fillCode(page, CODE_V1);
    await page.getByRole('button', { name: 'Create transformation' }).click();
    await page.getByRole('status').filter({ hasText: 'Created transformation shop cleanup (version 1)' }).waitFor();
    const [stored] = (await sy.admin('GET', '/transformations')).body.transformations;
    transformationId = stored.id;
    assert.equal(stored.name, 'shop cleanup');
    assert.equal(await page.locator('#code-error').count(), 0, 'the error went with the fix');
    const row = page.locator(`tr[data-transformation-id="${transformationId}"]`);
    assert.match((await row.textContent()) ?? '', /v1/);

    await fillCode(page, CODE_V2);
    await page.getByRole('button', { name: 'Save as version 2' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved version 2 of shop cleanup' }).waitFor();
    await row.filter({ hasText: 'v2' }).waitFor();
    assert.equal((await sy.admin('GET', `/transformations/${transformationId}`)).body.code, CODE_V2);

    const editorPanel = page.getByRole('region', { name: 'shop cleanup' });
    await editorPanel.getByLabel('Version').selectOption('1');
    await page.getByText('An older version: saving makes its code version 3.').waitFor();
    await eventually(async () => ((await page.getByLabel('Code', { exact: true }).inputValue()) === CODE_V1 ? true : undefined), 5_000, 'version 1 in the editor');
    await editorPanel.getByLabel('Version').selectOption('2');
    await eventually(async () => ((await page.getByLabel('Code', { exact: true }).inputValue()) === CODE_V2 ? true : undefined), 5_000, 'version 2 in the editor');
  });

  it("tests the editor's code on a source's last messages: output, dropped or the error, and logged lines; stores nothing", async () => {
    for (const event of ['Order Completed', 'Internal Ping', 'Broken']) {
      assert.equal((await sy.send('/v1/track', samples.writeKey, { userId: 'ada', event, properties: { total: 3 } })).status, 200);
    }
    const messagesBefore = (await sy.admin('GET', `/sources/${samples.id}/debugger?limit=100`)).body.messages.length;
    // The code in the editor runs, saved or not: its log line says "unsaved".
    await fillCode(page, CODE_V2.replace("log('saw '", "log('unsaved saw '"));
    const panel = page.getByRole('region', { name: "Test on a source's messages" });
    await panel.getByLabel('Messages of').selectOption(samples.id);
    await panel.getByRole('button', { name: 'Run on the last 20 messages' }).click();
    await panel.getByRole('status').filter({ hasText: 'Ran on 3 messages' }).waitFor();
    assert.match((await panel.getByRole('status').textContent()) ?? '', /1 dropped, 1 failed\. Nothing was stored or sent\./);

    const results = panel.getByRole('list', { name: 'Test results' }).locator('li.test-result');
    assert.equal(await results.count(), 3);
    const kept = results.filter({ hasText: '"event": "Order Completed"' });
    assert.match((await kept.textContent()) ?? '', /"plan": "PRO"/);
    assert.match((await kept.textContent()) ?? '', /unsaved saw Order Completed/);
    assert.match((await results.filter({ hasText: '"event": "Internal Ping"' }).textContent()) ?? '', /Outputdropped/);
    assert.match((await results.filter({ hasText: '"event": "Broken"' }).textContent()) ?? '', /Error: .*cannot handle Broken/);
    await assertAccessible(page, 'the transformation test results');
    await screenshot(page, 'transformations');

    // Nothing stored: no message, no delivery, no version.
    assert.equal((await sy.admin('GET', `/sources/${samples.id}/debugger?limit=100`)).body.messages.length, messagesBefore);
    assert.equal((await sy.admin('GET', `/transformations/${transformationId}`)).body.version, 2);
    assert.deepEqual(await listDeliveries(sy, samples.id), []);
  });

  it("attaches it to a source's Webhooks destination (latest, then pinned), keeping the secrets, and detaches it", async () => {
    const standardBefore = (await sy.admin('GET', `/sources/${shop.id}/destinations/webhooks/standard-webhooks/secret`)).body.secret;
    await page.goto(`${sy.url}/console#/transformations?id=${transformationId}`);
    const panel = page.getByRole('region', { name: 'Attach to a source' });
    await panel.getByLabel('Source').selectOption(shop.id);
    await panel.getByText('No transformation is attached to shop.').waitFor();
    await panel.getByRole('button', { name: 'Attach shop cleanup' }).click();
    await panel.getByRole('status').filter({ hasText: 'Attached shop cleanup' }).waitFor();
    await panel.getByText(/Attached to shop: shop cleanup .* latest version/).waitFor();
    const attached = (await sy.admin('GET', `/sources/${shop.id}/destinations/webhooks`)).body;
    assert.deepEqual(attached.settings.transformation, { id: transformationId });
    assert.equal(attached.settings.sharedSecret, '********', 'the shared secret is kept');
    assert.equal((await sy.admin('GET', `/sources/${shop.id}/destinations/webhooks/standard-webhooks/secret`)).body.secret, standardBefore);

    // A message sent now is delivered transformed by the latest version.
    assert.equal((await sy.send('/v1/track', shop.writeKey, { userId: 'bo', event: 'Order Completed', properties: { total: 1 } })).status, 200);
    const [delivered] = await receiver.waitFor(1);
    assert.deepEqual(JSON.parse(delivered!.body).properties, { total: 1, plan: 'PRO', version: 2 });

    await panel.getByLabel('Version to run').selectOption('1');
    await panel.getByRole('button', { name: 'Attach shop cleanup' }).click();
    await panel.getByText(/Attached to shop: shop cleanup .* v1, pinned/).waitFor();
    assert.deepEqual((await sy.admin('GET', `/sources/${shop.id}/destinations/webhooks`)).body.settings.transformation, { id: transformationId, version: 1 });
    await assertAccessible(page, 'the attach panel');
  });

  it('keeps the attached transformation when the Webhooks form saves the receivers', async () => {
    await page.goto(`${sy.url}/console#/webhooks?source=${shop.id}`);
    await page.getByLabel('URL of receiver 1').waitFor();
    await page.getByRole('button', { name: 'Save destination' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const saved = (await sy.admin('GET', `/sources/${shop.id}/destinations/webhooks`)).body;
    assert.deepEqual(saved.settings.transformation, { id: transformationId, version: 1 });
    assert.ok(saved.settings.standardWebhooks !== undefined, 'the Standard Webhooks secret is kept');
  });

  it('refuses to delete it while attached, naming the source, then detaches and deletes it', async () => {
    await page.goto(`${sy.url}/console#/transformations?id=${transformationId}`);
    const row = page.locator(`tr[data-transformation-id="${transformationId}"]`);
    await row.getByRole('button', { name: 'Delete shop cleanup' }).click();
    await page.getByRole('button', { name: 'Delete shop cleanup for good' }).click();
    await row.getByRole('alert').filter({ hasText: 'transformation_in_use' }).waitFor();
    assert.match((await row.getByRole('alert').textContent()) ?? '', new RegExp(shop.id));

    const panel = page.getByRole('region', { name: 'Attach to a source' });
    await panel.getByLabel('Source').selectOption(shop.id);
    await panel.getByRole('button', { name: 'Detach' }).click();
    await panel.getByText('No transformation is attached to shop.').waitFor();
    assert.equal((await sy.admin('GET', `/sources/${shop.id}/destinations/webhooks`)).body.settings.transformation, undefined);

    await row.getByRole('button', { name: 'Delete shop cleanup' }).click();
    await page.getByRole('button', { name: 'Delete shop cleanup for good' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted transformation shop cleanup' }).waitFor();
    assert.equal((await sy.admin('GET', `/transformations/${transformationId}`)).status, 404);
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
