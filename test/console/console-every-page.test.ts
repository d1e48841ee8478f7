import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser, seriousAxeViolations } from '../helpers/browser.js';
import { type ConsoleSession, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** A phone held upright (an iPhone 12 to 15 is 390 CSS pixels wide). */
const PHONE = { width: 390, height: 844 };
/** Not UTC and not English, so that a time shown in UTC or in the browser's own date format shows up. */
const PLACE = { timezoneId: 'America/New_York', locale: 'de-DE' };
/** How every time reads in that zone: `2026-11-24 04:05:07 EST` (EDT in summer). */
const SHOWN_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} E[SD]T$/;

/**
 * The times the page shows in its own words (stored JSON, code and form
 * fields aside): every date-like text, with what follows it, so that a time
 * without its zone is seen too.
 */
async function shownTimes(page: Page): Promise<string[]> {
  const text = await page.locator('main').evaluate((main) => {
    const copy = main.cloneNode(true) as any;
    for (const data of copy.querySelectorAll('pre, code, textarea, input, select')) data.remove();
    (globalThis as any).document.body.append(copy);
    const shown = copy.innerText as string;
    copy.remove();
    return shown;
  });
  // ISO-like dates, and dates as a locale writes them (24.11.2026, 11/24/2026, 24/11/2026).
  return [...text.matchAll(/\d{4}-\d{2}-\d{2}[ T][\d:.]+(?: [A-Z][A-Za-z+\-\d]*)?|\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b[^\n]{0,12}/g)].map((m) => m[0]);
}

/** How far the page itself scrolls sideways (0: not at all; a table or code block may still scroll inside its own box). */
async function sidewaysScroll(page: Page): Promise<{ overflow: number; widest: string }> {
  return page.evaluate(() => {
    const doc = (globalThis as any).document;
    const root = doc.scrollingElement;
    const overflow = root.scrollWidth - root.clientWidth;
    // Names the element reaching furthest right, to say what to fix.
    let widest = '';
    let right = root.clientWidth;
    for (const element of doc.querySelectorAll('body *')) {
      const box = element.getBoundingClientRect();
      if (box.right > right + 0.5) {
        right = box.right;
        widest = `${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ''}${element.className && typeof element.className === 'string' ? `.${element.className.trim().split(/\s+/).join('.')}` : ''} (right edge ${Math.round(box.right)} px)`;
      }
    }
    return { overflow, widest };
  });
}

/** Calls to the admin API the page has in flight (the debugger's stream, which stays open, aside). */
function trackCalls(page: Page): () => number {
  const inFlight = new Set<unknown>();
  const isCall = (url: string): boolean => url.includes('/admin/v1/') && !url.endsWith('/stream');
  page.on('request', (request) => {
    if (isCall(request.url())) inFlight.add(request);
  });
  page.on('requestfinished', (request) => inFlight.delete(request));
  page.on('requestfailed', (request) => inFlight.delete(request));
  return () => inFlight.size;
}

/** Resolves once no admin call has been in flight for 300 ms: the page shows what it loaded. */
async function settled(inFlight: () => number): Promise<void> {
  let quietSince = Date.now();
  for (;;) {
    if (inFlight() > 0) quietSince = Date.now();
    else if (Date.now() - quietSince >= 300) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describeBrowser('every console page on a phone (390 px wide, New York time, German): no sideways scrolling, times in one format with their zone, axe-checked', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let inFlight: () => number;
  /** Times checked over every page, to know the check saw some. */
  let timesSeen = 0;
  let source: { id: string; writeKey: string };
  let audienceId = '';
  let viewersId = '';
  let transformationId = '';

  before(async () => {
    receiver = await startReceiver();
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    source = await sy.createSource('Storefront web and mobile');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: `${receiver.url}/a/rather/long/path/for/a/receiver/that/goes/on`, headers: { 'X-Team': 'growth-analytics-platform' } }] },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    // Long, unbroken values: what a real stream holds and what stretches a layout.
    const batch = [
      { type: 'identify', userId: 'user-4f1c2a9e-0b7d-4c55-9a61-7e3c2b1d0f88', traits: { plan: 'pro', email: 'ada.lovelace@analytical-engines.example.com' } },
      { type: 'track', userId: 'user-4f1c2a9e-0b7d-4c55-9a61-7e3c2b1d0f88', event: 'Order Completed With A Long Event Name', properties: { revenue: 42, sku: 'SKU-0000000000000000000000000000000001' } },
      { type: 'track', userId: 'user-4f1c2a9e-0b7d-4c55-9a61-7e3c2b1d0f88', event: 'Order Completed With A Long Event Name', properties: { revenue: 7 } },
      { type: 'track', anonymousId: 'anon-9d8c7b6a-5f4e-3d2c-1b0a-998877665544', event: 'Product Viewed' },
      { type: 'page', anonymousId: 'anon-9d8c7b6a-5f4e-3d2c-1b0a-998877665544', name: 'Pricing' },
    ];
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    await eventually(async () => ((await sy.admin('GET', `/deliveries?sourceId=${source.id}&status=succeeded`)).body.deliveries?.length >= 5 ? true : undefined), 15_000, 'the deliveries');

    const plan = await sy.admin('POST', `/sources/${source.id}/tracking-plan`, {
      name: 'Web',
      events: { 'Order Completed With A Long Event Name': { properties: { type: 'object', properties: { revenue: { type: 'number' } }, required: ['revenue'] } } },
      controls: { unplannedEvents: 'flag', violations: 'flag' },
    });
    assert.ok(plan.status < 300, JSON.stringify(plan.body));
    const transformation = await sy.admin('POST', '/transformations', { name: 'Drop internal test users', code: 'export function transformEvent(event) { return event; }' });
    assert.ok(transformation.status < 300, JSON.stringify(transformation.body));
    transformationId = transformation.body.id;
    const trait = await sy.admin('POST', '/computed-traits', {
      name: 'Orders in the last 30 days',
      definition: { type: 'event_counter', event: 'Order Completed With A Long Event Name', within: '30d' },
      destinations: [source.id],
    });
    assert.equal(trait.status, 201, JSON.stringify(trait.body));
    const average = await sy.admin('POST', '/computed-traits', {
      name: 'Average order',
      definition: { type: 'aggregation', fn: 'avg', event: 'Order Completed With A Long Event Name', property: 'revenue', where: [{ property: 'revenue', op: '>', value: 0 }] },
    });
    assert.equal(average.status, 201, JSON.stringify(average.body));
    const audience = await sy.admin('POST', '/audiences', {
      name: 'Repeat buyers on the pro plan',
      definition: { and: [{ performed: { event: 'Order Completed With A Long Event Name', within: '30d', count: { op: '>=', value: 2 } } }, { trait: { key: 'plan', op: '=', value: 'pro' } }] },
      destinations: [source.id],
    });
    assert.equal(audience.status, 201, JSON.stringify(audience.body));
    audienceId = audience.body.id;
    const viewers = await sy.admin('POST', '/audiences', { name: 'Viewers', definition: { performed: { event: 'Product Viewed', count: { op: '>=', value: 1 } } } });
    assert.equal(viewers.status, 201, JSON.stringify(viewers.body));
    viewersId = viewers.body.id;
    for (const id of [audienceId, viewersId]) {
      await eventually(async () => ((await sy.admin('GET', `/audiences/${id}/members`)).body.members?.length === 1 ? true : undefined), 15_000, 'the audience member');
    }
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const replay = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to: new Date().toISOString() });
    assert.ok(replay.status < 300, JSON.stringify(replay.body));
    const regulation = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['user-00000000-aaaa-bbbb-cccc-dddddddddddd'] });
    assert.ok(regulation.status < 300, JSON.stringify(regulation.body));
    session = await signedInConsole(sy, PHONE, PLACE);
    page = session.page;
    inFlight = trackCalls(page);
  });

  after(async () => {
    await session?.close();
    await sy?.close();
    await receiver?.close();
  });

  /**
   * Opens `hash`, waits for the page's heading and for what `ready` names,
   * then resolves what is wrong with it (every page is looked at before a
   * test fails, so one run names them all).
   */
  async function problemsOf(hash: string, ready?: (page: Page) => Promise<void>): Promise<string[]> {
    // A full load each time (the token stays in the tab's session storage), then until the page's API calls are answered.
    await page.goto('about:blank');
    await page.goto(`${sy.url}/console${hash}`);
    await page.locator('#page-title').waitFor();
    await settled(inFlight);
    await ready?.(page);
    const problems: string[] = [];
    const { overflow, widest } = await sidewaysScroll(page);
    if (overflow > 0) problems.push(`${hash} scrolls sideways by ${overflow} px; widest: ${widest}`);
    for (const violation of await seriousAxeViolations(page)) problems.push(`${hash}: axe ${violation.id} (${violation.help}) at ${violation.nodes.join(', ')}`);
    const times = await shownTimes(page);
    timesSeen += times.length;
    for (const time of times) if (!SHOWN_TIME.test(time)) problems.push(`${hash} shows a time as "${time}", not as 2026-11-24 04:05:07 EST`);
    return problems;
  }

  it('every page of the navigation', async () => {
    const links = await page.getByRole('navigation', { name: 'Console pages' }).getByRole('link').evaluateAll((anchors) => anchors.map((a) => a.getAttribute('href') ?? ''));
    assert.ok(links.length >= 12, `found the pages: ${links.join(', ')}`);
    const problems: string[] = [];
    for (const link of links) problems.push(...(await problemsOf(link)));
    assert.deepEqual(problems, []);
    assert.ok(timesSeen >= 10, `saw ${timesSeen} times`);
  });

  it('shows a time in the browser\'s zone, named', async () => {
    const { createdAt } = (await sy.admin('GET', `/sources/${source.id}`)).body;
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-US', { timeZone: PLACE.timezoneId, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short' })
        .formatToParts(new Date(createdAt))
        .map((part) => [part.type, part.value]),
    );
    await page.goto(`${sy.url}/console#/sources`);
    const row = page.locator(`tr[data-source-id="${source.id}"]`);
    await row.getByText(`${parts['year']}-${parts['month']}-${parts['day']} ${parts['hour']}:${parts['minute']}:${parts['second']} ${parts['timeZoneName']}`).waitFor();
  });

  it('names who sent a message, or who is a member: the user id, or "anonymous" with the anonymous id when there is no user id', async () => {
    await page.goto(`${sy.url}/console#/debugger?source=${source.id}`);
    const messages = page.locator('button.message');
    const viewed = messages.filter({ hasText: 'Product Viewed' });
    await viewed.waitFor({ timeout: 30_000 }).catch(async (error: unknown) => {
      // Once in CI (two test files beside Chromium on two CPUs) the row did not show within 10 s; say what the page showed instead.
      const shown = await page.locator('main').innerText().catch(() => '(no main)');
      throw new Error(`the debugger showed no "Product Viewed" row; the page showed:\n${shown}`, { cause: error });
    });
    assert.match((await viewed.textContent()) ?? '', /Product Viewed · anonymous anon-9d8c7b6a-5f4e-3d2c-1b0a-998877665544$/);
    assert.match((await messages.filter({ hasText: 'Pricing' }).textContent()) ?? '', /Pricing · anonymous anon-9d8c7b6a/);
    assert.match((await messages.filter({ hasText: 'Order Completed' }).first().textContent()) ?? '', /· user user-4f1c2a9e-0b7d-4c55-9a61-7e3c2b1d0f88$/);
    await page.goto(`${sy.url}/console#/audiences?members=${viewersId}`);
    const member = page.locator('tr.member');
    await member.waitFor();
    assert.equal(await member.locator('td').first().textContent(), 'anonymous');
    assert.equal(await member.locator('td').nth(1).textContent(), 'anon-9d8c7b6a-5f4e-3d2c-1b0a-998877665544');
  });

  it('lists each computed trait and audience with a summary of its definition', async () => {
    const summaries = async (hash: string): Promise<Record<string, string>> => {
      await page.goto(`${sy.url}/console${hash}`);
      const rows = page.locator('tr[data-computation-id]');
      await rows.first().waitFor();
      return Object.fromEntries(
        await rows.evaluateAll((trs) => trs.map((tr) => [tr.querySelector('td')?.textContent ?? '', tr.querySelector('td.definition')?.textContent ?? ''])),
      );
    };
    assert.deepEqual(await summaries('#/computed-traits'), {
      'Orders in the last 30 days': 'count of Order Completed With A Long Event Name in the last 30d',
      'Average order': 'average of revenue over Order Completed With A Long Event Name where revenue > 0',
    });
    assert.deepEqual(await summaries('#/audiences'), {
      'Repeat buyers on the pro plan': 'performed Order Completed With A Long Event Name at least 2 times in the last 30d and trait plan = "pro"',
      Viewers: 'performed Product Viewed at least 1 time',
    });
  });

  it('the views inside pages: a message, a delivery with its attempts, members, a profile, an editor', async () => {
    const views: Array<[string, (page: Page) => Promise<void>]> = [
      [
        `#/debugger?source=${source.id}`,
        async (p) => {
          await p.locator('button.message').first().click();
          await p.getByRole('region', { name: 'Selected message' }).locator('pre').first().waitFor();
        },
      ],
      [
        `#/deliveries?source=${source.id}`,
        async (p) => {
          await p.getByRole('button', { name: /^Show the attempts of delivery/ }).first().click();
          await p.locator('tr.attempt').first().waitFor();
        },
      ],
      [`#/webhooks?source=${source.id}`, (p) => p.getByLabel('URL of receiver 1').waitFor()],
      [`#/tracking-plan?source=${source.id}`, (p) => p.getByLabel('Plan (JSON)').waitFor()],
      [`#/audiences?members=${audienceId}`, (p) => p.locator('tr.member').first().waitFor()],
      [`#/audiences?edit=${audienceId}`, (p) => p.getByLabel('Definition (JSON)').waitFor()],
      [`#/profiles?id=${encodeURIComponent('user_id:user-4f1c2a9e-0b7d-4c55-9a61-7e3c2b1d0f88')}`, (p) => p.getByRole('heading', { name: 'Traits', exact: true }).waitFor()],
      [`#/transformations?id=${transformationId}`, (p) => p.getByLabel(/Code/).first().waitFor()],
      ['#/transformations?new=1', (p) => p.getByLabel(/Code/).first().waitFor()],
    ];
    const problems: string[] = [];
    for (const [hash, ready] of views) problems.push(...(await problemsOf(hash, ready)));
    assert.deepEqual(problems, []);
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
