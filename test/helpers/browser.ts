import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';

/** Debian's Chromium; `.ci/run` installs it when missing. */
export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/**
 * `describe(name, fn)` when Chromium is installed. Otherwise one skipped test
 * that says so, or, under REQUIRE_CHROMIUM=1 (CI), one failing test.
 */
export function describeBrowser(name: string, fn: () => void): void {
  if (existsSync(CHROMIUM_PATH)) {
    describe(name, fn);
    return;
  }
  const message = `Chromium not found at ${CHROMIUM_PATH}`;
  if (process.env['REQUIRE_CHROMIUM'] === '1') {
    it(name, () => {
      throw new Error(`${message}; REQUIRE_CHROMIUM=1 makes this a failure`);
    });
    return;
  }
  console.warn(`SKIPPING ${name}: ${message}. Install it (apt-get install -y chromium) or set CHROMIUM_PATH.`);
  it(name, { skip: message }, () => {});
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

export interface ConsolePage {
  readonly context: BrowserContext;
  readonly page: Page;
  /** Script errors and errors logged by the page, for a test to assert empty at the end. */
  readonly pageErrors: string[];
}

/**
 * A page for the console tests: a fixed size, locale and time zone keep
 * screenshots comparable between runs (`place` sets another locale or zone). Error answers of the API (400, 401,
 * 404) are part of the flows tested and show as "Failed to load resource";
 * anything else logged as an error (a script error, a Content-Security-Policy
 * refusal) is collected in `pageErrors`.
 */
export async function openConsolePage(browser: Browser, place: { locale?: string; timezoneId?: string } = {}): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-GB', timezoneId: 'UTC', ...place });
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) pageErrors.push(message.text());
  });
  return { context, page, pageErrors };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: readonly string[];
}

/**
 * Runs axe-core on the page as it is and resolves its serious and critical
 * violations. axe is evaluated through the DevTools protocol, which the
 * console's Content-Security-Policy does not govern, so the policy stays on.
 */
export async function seriousAxeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: any[] }> } }).axe;
    const result = await axe.run((globalThis as any).document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n: any) => String(n.target)) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
