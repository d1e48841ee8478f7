import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const PLAN = {
  name: 'Web',
  events: { 'Order Completed': { properties: { type: 'object', properties: { revenue: { type: 'number' } }, required: ['revenue'] } } },
  controls: { unplannedEvents: 'flag', violations: 'block' },
};

describeBrowser('the console: tracking plans', () => {
  let sy: TestSwitchyard;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard();
    source = await sy.createSource('web');
    const batch = [
      { type: 'track', userId: 'u', event: 'Order Completed', properties: { revenue: 12 } },
      { type: 'track', userId: 'u', event: 'Order Completed', properties: { revenue: 'twelve' } },
      { type: 'track', userId: 'u', event: 'Page Pinged' },
      { type: 'identify', userId: 'u', traits: { plan: 'pro' } },
    ];
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await sy?.close();
  });

  const planField = () => page.getByLabel('Plan (JSON)');

  it('reports text that is not JSON, and a plan the API refuses, beside the plan field', async () => {
    await page.getByRole('link', { name: 'Tracking plans' }).click();
    await page.getByLabel('Source').selectOption(source.id);
    await page.getByText('web has no tracking plan').waitFor();
    assert.match(await planField().inputValue(), /"Order Completed"/, 'an example to start from');

    await planField().fill('{"events": ');
    await page.getByRole('button', { name: 'Save plan' }).click();
    await page.locator('#plan-error').filter({ hasText: 'the plan is not valid JSON' }).waitFor();
    assert.equal(await planField().getAttribute('aria-describedby'), 'plan-error');

    await planField().fill(JSON.stringify({ events: { Bad: { properties: { type: 'nonsense' } } } }));
    await page.getByRole('button', { name: 'Save plan' }).click();
    await page.locator('#plan-error').filter({ hasText: 'invalid_tracking_plan' }).waitFor();
    assert.match((await page.locator('#plan-error').textContent()) ?? '', /Bad/);
    assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).status, 404, 'nothing was saved');
  });

  it("previews an unsaved plan on the source's latest messages, with the violations it would find, saving nothing", async () => {
    await planField().fill(JSON.stringify(PLAN, null, 2));
    await page.getByRole('button', { name: 'Preview on the last 20 messages' }).click();
    const preview = page.getByRole('region', { name: 'Preview on the latest messages' });
    await preview.getByText('Of the 4 latest messages, this plan would flag 1 and block 1.').waitFor();
    assert.equal(await page.locator('#plan-error').count(), 0);
    const rows = preview.locator('tbody tr');
    assert.equal(await rows.count(), 4);
    const pinged = rows.filter({ hasText: 'Page Pinged' });
    assert.match((await pinged.textContent()) ?? '', /flag.*Unplanned-Event: event "Page Pinged" is not in the tracking plan/s);
    const broken = rows.filter({ hasText: 'Datatype-Mismatch' });
    assert.match((await broken.textContent()) ?? '', /track Order Completed.*block.*Datatype-Mismatch: revenue must be number/s);
    await broken.locator('summary').click();
    assert.match((await broken.locator('pre').textContent()) ?? '', /"revenue": "twelve"/);
    assert.match((await rows.filter({ hasText: 'identify' }).textContent()) ?? '', /pass.*none/s);
    await assertAccessible(page, 'the tracking plan preview');
    await screenshot(page, 'tracking-plan');
    assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).status, 404, 'a preview saves nothing');
  });

  it('saves the plan, which then blocks what breaks it, saves a second version and deletes it', async () => {
    await page.getByRole('button', { name: 'Save plan' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved version 1 of the tracking plan of web' }).waitFor();
    await page.getByText(/^Version 1 \(tp_/).waitFor();
    const stored = (await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).body;
    assert.equal(stored.version, 1);
    assert.deepEqual(stored.events, PLAN.events);

    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Order Completed', properties: { revenue: 'x' } })).status, 200);
    const [newest] = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages;
    assert.equal(newest.status, 'blocked');

    await planField().fill(JSON.stringify({ ...PLAN, controls: { unplannedEvents: 'allow', violations: 'flag' } }, null, 2));
    await page.getByRole('button', { name: 'Save as version 2' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved version 2' }).waitFor();
    assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).body.controls, { unplannedEvents: 'allow', violations: 'flag', unplannedProperties: 'allow' });

    await page.getByRole('button', { name: 'Delete the tracking plan of web' }).click();
    await page.getByRole('button', { name: 'Delete the tracking plan of web for good' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted the tracking plan of web' }).waitFor();
    await page.getByText('web has no tracking plan').waitFor();
    assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).status, 404);
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
