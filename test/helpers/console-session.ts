import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, openConsolePage, seriousAxeViolations } from './browser.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard } from './switchyard.js';

/** A Chromium tab signed in to a test server's console, for one test file. */
export interface ConsoleSession {
  readonly browser: Browser;
  readonly context: BrowserContext;
  readonly page: Page;
  /** Script errors and Content-Security-Policy refusals seen by the page (see openConsolePage). */
  readonly pageErrors: string[];
  close(): Promise<void>;
}

/** Launches Chromium and signs in through the sign-in form, as a user does. */
export async function signedInConsole(
  sy: TestSwitchyard,
  viewport?: { width: number; height: number },
  place?: { locale?: string; timezoneId?: string },
): Promise<ConsoleSession> {
  const browser = await launchChromium();
  const { context, page, pageErrors } = await openConsolePage(browser, place);
  // A step that waits longer than this has failed; fail fast instead of at the 30 s default.
  page.setDefaultTimeout(10_000);
  if (viewport !== undefined) await page.setViewportSize(viewport);
  await page.goto(`${sy.url}/console`);
  await page.getByLabel('Admin token').fill(TEST_ADMIN_TOKEN);
  await page.getByLabel('Admin token').press('Enter');
  await page.getByRole('navigation', { name: 'Console pages' }).waitFor();
  return {
    browser,
    context,
    page,
    pageErrors,
    async close() {
      await context.close();
      await browser.close();
    },
  };
}

/** Fails on any serious or critical axe-core violation of the page as it is now. */
export async function assertAccessible(page: Page, where: string): Promise<void> {
  const violations = await seriousAxeViolations(page);
  assert.deepEqual(violations, [], `axe-core found serious or critical violations on ${where}: ${JSON.stringify(violations, null, 2)}`);
}

/** With UPDATE_SCREENSHOTS=1 the tests save pages for docs/console.md (docs/console/NAME.png); otherwise nothing is written. */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env['UPDATE_SCREENSHOTS'] !== '1') return;
  // From dist/test/helpers to the repository's docs/console.
  const dir = path.resolve(import.meta.dirname, '..', '..', '..', 'docs', 'console');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
}
