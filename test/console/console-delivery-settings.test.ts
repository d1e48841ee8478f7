import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries } from '../helpers/webhooks.js';

describeBrowser('the console: rate limits, filters and Standard Webhooks of a destination', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };
  const destination = async (): Promise<any> => (await sy.admin('GET', `/sources/${source.id}/destinations/webhooks`)).body;

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    source = await sy.createSource('hooks');
    assert.equal((await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }], sharedSecret: 'kept-secret' } })).status, 200);
    session = await signedInConsole(sy);
    page = session.page;
    await page.goto(`${sy.url}/console#/webhooks?source=${source.id}`);
    await page.getByLabel('URL of receiver 1').waitFor();
  });

  after(async () => {
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  const save = async (): Promise<void> => page.getByRole('button', { name: 'Save destination' }).click();

  it("sets a receiver's rate limit, with the API's refusal beside the field", async () => {
    const rate = page.getByLabel('Most requests per second to receiver 1');
    await rate.fill('0');
    await save();
    await page.locator('#error-rate-0').filter({ hasText: 'maxRequestsPerSecond' }).waitFor();
    assert.equal(await rate.getAttribute('aria-describedby'), 'error-rate-0');
    await rate.fill('20');
    await save();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const saved = await destination();
    assert.equal(saved.settings.webhooks.length, 1);
    assert.equal(saved.settings.webhooks[0].url, receiver.url);
    assert.equal(saved.settings.webhooks[0].maxRequestsPerSecond, 20);
    assert.equal(saved.settings.sharedSecret, '********', 'the shared secret is kept');
  });

  it('edits the filters as JSON: not JSON and invalid_filter beside the field, then a filter that drops a message', async () => {
    const filters = page.getByLabel('Filters (JSON)');
    await filters.fill('[{"title": ');
    await save();
    await page.locator('#error-filters').filter({ hasText: 'filters are not valid JSON' }).waitFor();
    await filters.fill(JSON.stringify([{ title: 'no pings', if: { field: 'event', op: 'resembles', value: 'Ping' }, action: 'drop' }]));
    await save();
    await page.locator('#error-filters').filter({ hasText: 'invalid_filter' }).waitFor();
    assert.deepEqual((await destination()).filters, [], 'nothing saved');

    await filters.fill(JSON.stringify([{ title: 'no pings', if: { field: 'event', op: '=', value: 'Ping' }, action: 'drop' }], null, 2));
    await save();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    assert.equal((await destination()).filters[0].title, 'no pings');
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Ping' })).status, 200);
    const [ping] = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages;
    assert.equal(ping.status, 'filtered');
    assert.deepEqual(await listDeliveries(sy, source.id), []);
  });

  it('turns Standard Webhooks on, reveals and rotates the secret, and keeps it when the form saves', async () => {
    const panel = page.getByRole('region', { name: 'Standard Webhooks' });
    await panel.getByRole('button', { name: 'Turn on Standard Webhooks' }).click();
    await panel.getByRole('status').filter({ hasText: 'Standard Webhooks signing is on' }).waitFor();
    await panel.getByRole('button', { name: 'Reveal the secret' }).click();
    const shown = panel.locator('code.secret');
    await shown.waitFor();
    const first = (await sy.admin('GET', `/sources/${source.id}/destinations/webhooks/standard-webhooks/secret`)).body.secret;
    assert.match(first, /^whsec_/);
    assert.equal(await shown.textContent(), first);
    assert.equal((await destination()).settings.sharedSecret, '********', 'the shared secret is kept');
    await assertAccessible(page, 'the Webhooks page with Standard Webhooks on');

    // A delivery now carries the Standard Webhooks headers.
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Signed' })).status, 200);
    const [signed] = await receiver.waitFor(1);
    assert.match(String(signed!.headers['webhook-signature']), /^v1,/);

    await panel.getByLabel('Previous secret keeps signing for (seconds)').fill('3600');
    await panel.getByRole('button', { name: 'Rotate the secret' }).click();
    await panel.getByRole('status').filter({ hasText: 'Rotated. The previous secret also signs until' }).waitFor();
    const second = (await sy.admin('GET', `/sources/${source.id}/destinations/webhooks/standard-webhooks/secret`)).body.secret;
    assert.notEqual(second, first);
    assert.equal(await shown.textContent(), second);
    await panel.getByText(/^On\. Rotating: the previous secret also signs until/).waitFor();
    const rotating = await destination();
    assert.ok(Date.parse(rotating.settings.standardWebhooks.previousValidUntil) > Date.now() + 3_000_000);
    await panel.getByRole('button', { name: 'Hide the secret' }).click();
    await panel.getByRole('button', { name: 'Reveal the secret' }).waitFor();
    await screenshot(page, 'webhooks-settings');

    // Saving the form during the rotation keeps the secret and the rotation.
    await save();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    assert.equal((await sy.admin('GET', `/sources/${source.id}/destinations/webhooks/standard-webhooks/secret`)).body.secret, second);
    assert.ok((await destination()).settings.standardWebhooks.previousValidUntil !== undefined);

    await panel.getByRole('button', { name: 'Turn off Standard Webhooks' }).click();
    await panel.getByRole('button', { name: 'Turn on Standard Webhooks' }).waitFor();
    assert.equal((await destination()).settings.standardWebhooks, undefined);
    assert.equal((await destination()).filters.length, 1, 'the filters are kept');
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
