import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/** Flags, so every message is delivered and its violations are counted. */
const PLAN = {
  name: 'Web',
  events: { 'Order Completed': { properties: { type: 'object', properties: { revenue: { type: 'number' } }, required: ['revenue'] } } },
  controls: { unplannedEvents: 'flag', violations: 'flag' },
};

describeBrowser('the console: tracking plan violation counts and observed schema', () => {
  let sy: TestSwitchyard;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard();
    source = await sy.createSource('web');
    assert.equal((await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, PLAN)).status, 200);
    const batch = [
      { type: 'track', userId: 'u', messageId: 'm-ok', event: 'Order Completed', properties: { revenue: 12, items: [{ sku: 'a-1' }] } },
      { type: 'track', userId: 'u', messageId: 'm-bad-1', event: 'Order Completed', properties: { revenue: 'twelve' } },
      { type: 'track', userId: 'u', messageId: 'm-bad-2', event: 'Order Completed', properties: { revenue: 'thirteen' } },
      { type: 'track', userId: 'u', messageId: 'm-missing', event: 'Order Completed', properties: {} },
      { type: 'track', userId: 'u', messageId: 'm-ping', event: 'Page Pinged' },
      { type: 'identify', userId: 'u', messageId: 'm-who', traits: { plan: 'pro', seats: 3 } },
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
  const violations = () => page.getByRole('region', { name: 'Violations in the last 24 hours' });
  const observed = () => page.getByRole('region', { name: 'Observed schema' });

  it('counts the violations of the flagged plan per event and type, with the latest example of each', async () => {
    await page.getByRole('link', { name: 'Tracking plans' }).click();
    await page.getByLabel('Source').selectOption(source.id);
    await page.getByText(/^Version 1 \(tp_/).waitFor();
    const rows = violations().locator('tbody tr');
    await rows.first().waitFor();
    const texts = await rows.allTextContents();
    assert.equal(texts.length, 3, texts.join('\n'));
    const cells = async (index: number): Promise<string[]> => rows.nth(index).locator('td').allTextContents();
    // Biggest first: the two mismatched revenues, then the missing one and the unplanned event.
    const [event, type, count, latest] = await cells(0);
    assert.equal(event, 'track Order Completed');
    assert.equal(type, 'Datatype-Mismatch');
    assert.equal(count, '2');
    assert.match(latest ?? '', /revenue must be number/);
    assert.match(latest ?? '', /message m-bad-2,/, 'the latest of the two');
    const rest = [await cells(1), await cells(2)].map(([e, t, c, l]) => ({ e, t, c, l }));
    const missing = rest.find((row) => row.t === 'Required-Missing');
    assert.equal(missing?.e, 'track Order Completed');
    assert.equal(missing?.c, '1');
    assert.match(missing?.l ?? '', /message m-missing,/);
    const unplanned = rest.find((row) => row.t === 'Unplanned-Event');
    assert.equal(unplanned?.e, 'track Page Pinged');
    assert.equal(unplanned?.c, '1');
    assert.match(unplanned?.l ?? '', /Page Pinged.*message m-ping,/s);

    // A new violation shows on refresh.
    assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', messageId: 'm-bad-3', event: 'Order Completed', properties: { revenue: false } })).status, 200);
    await violations().getByRole('button', { name: 'Refresh the counts' }).click();
    await rows.first().filter({ hasText: 'm-bad-3' }).waitFor();
    assert.equal((await cells(0))[2], '3');
  });

  it('shows the observed schema: each event with its count, and its paths with the types seen', async () => {
    const entries = observed().locator('details');
    await entries.first().waitFor();
    // Loaded with the page, before m-bad-3: a refresh counts it.
    await observed().getByRole('button', { name: 'Refresh the observed schema' }).click();
    await observed().getByText('track Order Completed: 5 messages').waitFor();
    const summaries = await observed().locator('summary').allTextContents();
    assert.deepEqual(summaries, [
      'track Order Completed: 5 messages, 4 properties paths',
      'identify: 1 message, 2 traits paths',
      'track Page Pinged: 1 message, 0 properties paths',
    ]);
    const order = entries.filter({ hasText: 'track Order Completed' });
    await order.locator('summary').click();
    const pathRows = order.locator('tbody tr');
    await pathRows.first().waitFor();
    const paths = await Promise.all((await pathRows.all()).map(async (row) => (await row.locator('td').allTextContents()).join(' | ')));
    assert.deepEqual(paths, ['items | array | 1', 'items[] | object | 1', 'items[].sku | string | 1', 'revenue | string, integer, boolean | 4']);
    const identify = entries.filter({ hasText: 'identify' });
    await identify.locator('summary').click();
    // Its rows render after the click: wait for them before reading (read at once, a fast machine found none).
    await identify.locator('tbody tr').first().waitFor();
    assert.deepEqual(
      await Promise.all((await identify.locator('tbody tr').all()).map(async (row) => (await row.locator('td').allTextContents()).join(' | '))),
      ['plan | string | 1', 'seats | integer | 1'],
    );
    await assertAccessible(page, 'the tracking plan page with violation counts and the observed schema');
    await screenshot(page, 'tracking-plan-observed');
  });

  it('drafts a plan from the observed schema into the editor without saving it; saving it makes version 2', async () => {
    await page.getByRole('button', { name: 'Draft from observed schema' }).click();
    await page.getByRole('status').filter({ hasText: 'Drafted a plan from the observed schema' }).waitFor();
    const drafted = JSON.parse(await planField().inputValue()) as { events: Record<string, { properties: { required?: string[]; properties: Record<string, { type: unknown }> } }>; identify?: unknown };
    assert.deepEqual(Object.keys(drafted.events).sort(), ['Order Completed', 'Page Pinged']);
    assert.deepEqual([...(drafted.events['Order Completed']?.properties.properties['revenue']?.type as string[])].sort(), ['boolean', 'number', 'string'], 'a number seen only whole is drafted as number');
    assert.ok(drafted.identify !== undefined, 'the identify traits are drafted too');
    assert.deepEqual(drafted, (await sy.admin('POST', `/sources/${source.id}/tracking-plan/from-schema`)).body, 'the editor holds the API draft');
    assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).body.version, 1, 'a draft stores nothing');

    await page.getByRole('button', { name: 'Save as version 2' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved version 2' }).waitFor();
    const stored = (await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).body;
    assert.equal(stored.version, 2);
    assert.deepEqual(stored.events, drafted.events);
  });

  it('pages through the observed schema: 100 events a page, Next and Previous', async () => {
    const paged = await sy.createSource('paged');
    // 101 events: E000 sent twice (first), then E001 … E100 once each (by name).
    const batch = [{ type: 'track', userId: 'u', event: 'E000' }, ...Array.from({ length: 101 }, (_, i) => ({ type: 'track', userId: 'u', event: `E${String(i).padStart(3, '0')}` }))];
    assert.equal((await sy.send('/v1/batch', paged.writeKey, { batch })).status, 200);
    // The page lists the sources it loaded: load it again for the new one.
    await page.reload();
    await page.getByLabel('Source').selectOption(paged.id);
    const summaries = observed().locator('summary');
    await observed().getByText('track E000: 2 messages').waitFor();
    assert.equal(await summaries.count(), 100);
    await observed().getByRole('button', { name: 'Next events' }).click();
    await observed().getByText('track E100: 1 message').waitFor();
    assert.deepEqual(await summaries.allTextContents(), ['track E100: 1 message, 0 properties paths']);
    assert.equal(await observed().getByRole('button', { name: 'Next events' }).count(), 0, 'the last page');
    await observed().getByRole('button', { name: 'Previous events' }).click();
    await observed().getByText('track E000: 2 messages').waitFor();
    assert.equal(await summaries.count(), 100);
    await page.getByLabel('Source').selectOption(source.id);
    await observed().getByText('track Order Completed: 5 messages').waitFor();
    assert.equal(await observed().getByRole('button', { name: 'Previous events' }).count(), 0, 'another source starts at its first page');
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
