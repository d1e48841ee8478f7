import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { describeBrowser, launchChromium, openConsolePage, seriousAxeViolations } from '../helpers/browser.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

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

interface Sync {
  type: string;
  userId?: string;
  traits: Record<string, unknown>;
  context?: { personas?: { computation_class: string; computation_key: string } };
}

/** The Engage identifies (those with context.personas) the receiver got for `key`. */
const syncsOf = (receiver: TestReceiver, key: string): Sync[] =>
  receiver.requests
    .map((r) => JSON.parse(r.body) as Sync)
    .filter((m) => m.type === 'identify' && m.context?.personas?.computation_key === key);

const REPEAT_BUYERS = '{"and": [{"performed": {"event": "Order Completed", "count": {"op": ">=", "value": 2}}}, {"trait": {"key": "plan", "op": "=", "value": "pro"}}]}';

describeBrowser('the web console: computed traits, audiences and profiles in Chromium', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let source: { id: string; writeKey: string };
  let audienceId = '';
  let pageErrors: string[] = [];

  before(async () => {
    receiver = await startReceiver();
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    source = await sy.createSource('shop');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    browser = await launchChromium();
    ({ context, page, pageErrors } = await openConsolePage(browser));
  });

  after(async () => {
    await context?.close();
    await browser?.close();
    await sy?.close();
    await receiver?.close();
  });

  it('signs in', async () => {
    await page.goto(`${sy.url}/console#/audiences`);
    await page.getByLabel('Admin token').fill(TEST_ADMIN_TOKEN);
    await page.getByLabel('Admin token').press('Enter');
    await page.getByRole('heading', { name: 'Audiences', level: 1 }).waitFor();
    await page.getByText('No audiences yet.').waitFor();
  });

  it("shows the API's invalid_definition message, naming the field, next to the definition; creates the audience once fixed", async () => {
    const definition = page.getByLabel('Definition (JSON)');
    await page.getByLabel('Name', { exact: true }).fill('Repeat Buyers');
    await definition.fill('{"performed": ');
    await page.getByRole('button', { name: 'Create audience' }).click();
    const fieldError = page.locator('#error-definition');
    await fieldError.getByText(/definition is not valid JSON/).waitFor();

    await definition.fill(REPEAT_BUYERS.replace('">="', '"at least"'));
    await page.getByLabel('shop (').check();
    await page.getByRole('button', { name: 'Create audience' }).click();
    await fieldError.getByText(/definition\.and\[0\]\.performed\.count\.op must be one of = != > >= < <= \(invalid_definition\)/).waitFor();
    assert.equal(await definition.getAttribute('aria-invalid'), 'true');
    assert.match((await definition.getAttribute('aria-describedby')) ?? '', /\berror-definition\b/);
    assert.deepEqual((await sy.admin('GET', '/audiences')).body.audiences, [], 'nothing was created');
    await assertAccessible(page, 'the audience form with an error');
    await screenshot(page, 'audience-error');

    await definition.fill(REPEAT_BUYERS);
    await page.getByRole('button', { name: 'Create audience' }).click();
    await page.getByRole('status').filter({ hasText: 'Created audience Repeat Buyers (key repeat_buyers).' }).waitFor();
    assert.equal(await page.locator('#error-definition').count(), 0, 'the error goes once saved');
    const [created] = (await sy.admin('GET', '/audiences')).body.audiences;
    audienceId = created.id;
    assert.deepEqual(created.definition, JSON.parse(REPEAT_BUYERS));
    assert.deepEqual(created.destinations, [source.id]);
    // The list refreshes itself while the audience is computing, until it is live.
    const row = page.locator(`tr[data-computation-id="${audienceId}"]`);
    await row.locator('.badge.live').waitFor();
    assert.match((await row.textContent()) ?? '', /repeat_buyers/);
    assert.match((await row.textContent()) ?? '', /shop/);
  });

  it('creates a computed trait that syncs to the source', async () => {
    await page.getByRole('link', { name: 'Computed traits' }).click();
    await page.getByText('No computed traits yet.').waitFor();
    await page.getByLabel('Name', { exact: true }).fill('Orders Total');
    await page.getByLabel('Definition (JSON)').fill('{"type": "aggregation", "fn": "sum", "event": "Order Completed", "property": "total"}');
    await page.getByLabel('shop (').check();
    await page.getByRole('button', { name: 'Create computed trait' }).click();
    await page.getByRole('status').filter({ hasText: 'Created computed trait Orders Total (key orders_total).' }).waitFor();
    await page.locator('tr[data-computation-id] .badge.live').waitFor();
    await assertAccessible(page, 'the computed traits page');
    await screenshot(page, 'computed-traits');
  });

  it("shows a profile that enters the audience in its size and members, and the sync identify reaches the source's receiver", async () => {
    assert.equal((await sy.send('/v1/identify', source.writeKey, { userId: 'u1', traits: { plan: 'pro', name: 'Ada' } })).status, 200);
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order Completed', properties: { total: 20 } })).status, 200);
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order Completed', properties: { total: 22 } })).status, 200);
    // One order is not enough.
    assert.equal((await sy.send('/v1/identify', source.writeKey, { userId: 'u2', traits: { plan: 'pro' } })).status, 200);
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u2', event: 'Order Completed', properties: { total: 5 } })).status, 200);

    const entered = await eventually(() => syncsOf(receiver, 'repeat_buyers').find((s) => s.userId === 'u1' && s.traits['repeat_buyers'] === true), 15_000, 'the audience identify');
    assert.equal(entered.context?.personas?.computation_class, 'audience');
    await eventually(() => syncsOf(receiver, 'orders_total').find((s) => s.userId === 'u1' && s.traits['orders_total'] === 42), 15_000, 'the computed trait identify');
    await eventually(async () => ((await sy.admin('GET', `/audiences/${audienceId}`)).body.size === 1 ? true : undefined), 15_000, 'the audience size to be 1');
    assert.equal(syncsOf(receiver, 'repeat_buyers').filter((s) => s.userId === 'u2').length, 0);

    await page.getByRole('link', { name: 'Audiences' }).click();
    const row = page.locator(`tr[data-computation-id="${audienceId}"]`);
    await row.waitFor();
    await page.getByRole('button', { name: 'Refresh audiences' }).click();
    await row.locator('td.number').filter({ hasText: /^1$/ }).waitFor();
    await page.getByRole('button', { name: 'Members of Repeat Buyers' }).click();
    const members = page.getByRole('region', { name: 'Members of Repeat Buyers' });
    await members.getByRole('link', { name: 'u1' }).waitFor();
    assert.equal(await members.locator('tr.member').count(), 1);
    await assertAccessible(page, 'the audiences page with its members');
    await screenshot(page, 'audiences');
  });

  it("looks the profile up: identifiers, traits, computed traits, audiences and recent events", async () => {
    await page.getByRole('region', { name: 'Members of Repeat Buyers' }).getByRole('link', { name: 'u1' }).click();
    await page.getByRole('heading', { name: 'Profiles', level: 1 }).waitFor();
    assert.equal(await page.getByRole('textbox', { name: 'Identifier', exact: true }).inputValue(), 'user_id:u1');
    const identifiers = page.getByRole('region', { name: 'Identifiers' });
    await identifiers.getByText('user_id:u1').waitFor();
    const traits = page.locator('table[data-section="traits"]');
    assert.match((await traits.textContent()) ?? '', /plan"pro"/);
    const computed = page.locator('table[data-section="computed-traits"]');
    assert.match((await computed.textContent()) ?? '', /orders_total42/);
    await page.getByRole('region', { name: 'Audiences' }).getByText('repeat_buyers').waitFor();
    const events = page.locator('tr.event');
    await events.nth(2).waitFor();
    assert.equal(await events.count(), 3);
    assert.match((await events.first().textContent()) ?? '', /track.*Order Completed.*shop/);
    await events.first().locator('summary').click();
    await events.first().getByText('"total": 22').waitFor();
    await assertAccessible(page, 'the profile page');
    await screenshot(page, 'profiles');

    // A bare id is a user id; u2 is in no audience.
    await page.getByRole('textbox', { name: 'Identifier', exact: true }).fill('u2');
    await page.getByRole('textbox', { name: 'Identifier', exact: true }).press('Enter');
    await page.getByRole('region', { name: 'Identifiers' }).getByText('user_id:u2').waitFor();
    await page.getByText('In no audience.').waitFor();
    // An unknown identifier: the API's message.
    await page.getByRole('textbox', { name: 'Identifier', exact: true }).fill('anonymous_id:nobody');
    await page.getByRole('button', { name: 'Look up' }).click();
    await page.getByRole('alert').filter({ hasText: 'no profile has the identifier "anonymous_id:nobody" (profile_not_found)' }).waitFor();
  });

  it('edits an audience: its form takes the focus, and a stricter definition empties it', async () => {
    await page.getByRole('link', { name: 'Audiences' }).click();
    await page.getByRole('button', { name: 'Edit Repeat Buyers' }).click();
    await page.getByRole('heading', { name: 'Edit audience Repeat Buyers' }).waitFor();
    await page.waitForFunction(() => (globalThis as any).document.activeElement?.name === 'name');
    const definition = page.getByLabel('Definition (JSON)');
    assert.deepEqual(JSON.parse(await definition.inputValue()), JSON.parse(REPEAT_BUYERS));
    await page.getByLabel('Name', { exact: true }).fill('Loyal Buyers');
    await definition.fill(REPEAT_BUYERS.replace('"value": 2', '"value": 3'));
    await page.getByRole('button', { name: 'Save audience' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved audience Loyal Buyers.' }).waitFor();
    await page.getByRole('heading', { name: 'New audience' }).waitFor();
    // The keyboard is back on the row's Edit button.
    await page.waitForFunction(() => (globalThis as any).document.activeElement?.getAttribute('aria-label') === 'Edit Loyal Buyers');
    const stored = (await sy.admin('GET', `/audiences/${audienceId}`)).body;
    assert.equal(stored.name, 'Loyal Buyers');
    assert.equal(stored.key, 'repeat_buyers', 'the key stays');
    assert.equal(stored.definition.and[0].performed.count.value, 3);
    await eventually(async () => ((await sy.admin('GET', `/audiences/${audienceId}`)).body.size === 0 ? true : undefined), 15_000, 'the audience to empty');
    await page.getByRole('button', { name: 'Members of Loyal Buyers' }).click();
    await page.getByRole('region', { name: 'Members of Loyal Buyers' }).getByText('No members right now.').waitFor();
    await page.getByRole('button', { name: 'Close members' }).click();
  });

  it("pages through an audience's members with the API's cursor", async () => {
    const viewers = await sy.admin('POST', '/audiences', { name: 'Viewers', definition: { performed: { event: 'Viewed' } } });
    assert.equal(viewers.status, 201, JSON.stringify(viewers.body));
    const batch = Array.from({ length: 51 }, (_, i) => ({ type: 'track', userId: `viewer-${String(i).padStart(2, '0')}`, event: 'Viewed' }));
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    await eventually(async () => ((await sy.admin('GET', `/audiences/${viewers.body.id}`)).body.size === 51 ? true : undefined), 15_000, '51 viewers');

    await page.getByRole('button', { name: 'Refresh audiences' }).click();
    await page.getByRole('button', { name: 'Members of Viewers' }).click();
    const members = page.getByRole('region', { name: 'Members of Viewers' });
    await members.getByText('Members 1 to 50').waitFor();
    assert.equal(await members.locator('tr.member').count(), 50);
    const firstPage = await members.locator('tr.member td:first-child').allTextContents();
    await members.getByRole('button', { name: 'Next members' }).click();
    await members.getByText('Members 51 to 51').waitFor();
    assert.equal(await members.locator('tr.member').count(), 1);
    const last = (await members.locator('tr.member td:first-child').textContent()) ?? '';
    assert.ok(!firstPage.includes(last), 'the second page has the one member the first did not');
    assert.deepEqual([...firstPage, last].sort(), batch.map((m) => m.userId).sort());
    assert.equal(await members.getByRole('button', { name: 'Next members' }).count(), 0);
    await members.getByRole('button', { name: 'Previous members' }).click();
    await members.getByText('Members 1 to 50').waitFor();
    await sy.admin('DELETE', `/audiences/${viewers.body.id}`);
  });

  it('deletes the audience after a confirmation, from the keyboard', async () => {
    await page.getByRole('button', { name: 'Refresh audiences' }).click();
    await page.getByRole('button', { name: 'Members of Viewers' }).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Delete Loyal Buyers' }).focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('alertdialog');
    await dialog.waitFor();
    assert.match((await dialog.textContent()) ?? '', /stop being computed and synced/);
    await page.waitForFunction(() => (globalThis as any).document.activeElement?.textContent === 'Delete Loyal Buyers for good');
    await assertAccessible(page, 'the delete confirmation');
    // "Keep it" deletes nothing and gives the focus back.
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await dialog.waitFor({ state: 'detached' });
    await page.waitForFunction(() => (globalThis as any).document.activeElement?.getAttribute('aria-label') === 'Delete Loyal Buyers');
    assert.equal((await sy.admin('GET', `/audiences/${audienceId}`)).status, 200);

    await page.keyboard.press('Enter');
    await dialog.getByRole('button', { name: 'Delete Loyal Buyers for good' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted audience Loyal Buyers.' }).waitFor();
    await page.getByText('No audiences yet.').waitFor();
    assert.equal((await sy.admin('GET', `/audiences/${audienceId}`)).status, 404);
  });

  it('shows, in its row, why the API refuses to delete a computed trait an audience reads', async () => {
    const reader = await sy.admin('POST', '/audiences', { name: 'Big Spenders', definition: { computedTrait: { key: 'orders_total', op: '>=', value: 40 } } });
    assert.equal(reader.status, 201, JSON.stringify(reader.body));
    await page.getByRole('link', { name: 'Computed traits' }).click();
    await page.getByRole('button', { name: 'Delete Orders Total' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Delete Orders Total for good' }).click();
    const row = page.locator('tr[data-computation-id]').filter({ hasText: 'Orders Total' });
    await row.getByRole('alert').filter({ hasText: 'big_spenders read "orders_total"; change or delete them first (invalid_request)' }).waitFor();
    assert.equal((await sy.admin('GET', '/computed-traits')).body.computedTraits.length, 1, 'nothing was deleted');
  });

  it('raised no script error and no Content-Security-Policy refusal in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
