import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, signedInConsole } from '../helpers/console-session.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

describeBrowser('the console: favicon', () => {
  let sy: TestSwitchyard;
  let session: ConsoleSession;

  before(async () => {
    sy = await startTestSwitchyard();
    session = await signedInConsole(sy);
  });

  after(async () => {
    await session?.close();
    await sy?.close();
  });

  it('links an SVG icon that the server serves from its own origin, allowed by its Content-Security-Policy', async () => {
    const href = (await session.page.locator('link[rel="icon"]').getAttribute('href')) ?? '';
    assert.equal(href, '/console/assets/favicon.svg');
    const icon = await fetch(`${sy.url}${href}`);
    assert.equal(icon.status, 200);
    assert.equal(icon.headers.get('content-type'), 'image/svg+xml');
    assert.match(await icon.text(), /^<svg /);
    // Loaded by the page as an image: it decodes, so neither the type nor the policy refused it.
    const size = await session.page.evaluate(async (url) => {
      const image = new (globalThis as any).Image();
      image.src = url;
      await image.decode();
      return Number(image.naturalWidth);
    }, href);
    assert.ok(size > 0);
    assert.deepEqual(session.pageErrors, []);
  });
});
