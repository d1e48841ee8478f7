import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, it } from 'node:test';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, signedInConsole } from '../helpers/console-session.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const run = promisify(execFile);

describeBrowser('the console: empty pages say what to do', () => {
  let sy: TestSwitchyard;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    source = await sy.createSource('fresh');
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    await session?.close();
    await sy?.close();
  });

  it('the overview without messages points to the live debugger', async () => {
    await page.goto(`${sy.url}/console#/overview`);
    const hint = page.getByText('No messages in the last hour.');
    await hint.waitFor();
    assert.equal(await hint.getByRole('link', { name: 'how to send one' }).getAttribute('href'), '#/debugger');
    await assertAccessible(page, 'the empty overview');
  });

  it("the debugger of a source without messages shows a command with its write key; run as shown, its event appears", async () => {
    await page.goto(`${sy.url}/console#/debugger?source=${source.id}`);
    const panel = page.getByRole('region', { name: 'No message from this source yet' });
    const command = (await panel.getByLabel('A command that sends a first event').textContent()) ?? '';
    assert.ok(command.includes(`-u '${source.writeKey}:'`), command);
    assert.ok(command.includes(`${sy.url}/v1/track`), command);
    await assertAccessible(page, 'the debugger of a source without messages');

    // The command as the page shows it, run by a shell as a user pasting it would.
    const { stdout } = await run('sh', ['-c', command]);
    assert.equal(JSON.parse(stdout).success, true, stdout);
    await page.locator('button.message').filter({ hasText: 'Signed Up' }).waitFor();
    await panel.waitFor({ state: 'detached' });
  });

  it('deliveries: none yet says where to set receivers and how to send; a filter with none says none match', async () => {
    await page.goto(`${sy.url}/console#/deliveries?source=${source.id}`);
    const hint = page.getByText('No deliveries yet.');
    await hint.waitFor();
    assert.equal(await hint.getByRole('link', { name: 'set its receivers' }).getAttribute('href'), `#/webhooks?source=${source.id}`);
    assert.equal(await hint.getByRole('link', { name: 'how to send one' }).getAttribute('href'), `#/debugger?source=${source.id}`);
    await assertAccessible(page, 'the empty deliveries page');
    await page.getByLabel('Status').selectOption('failed');
    await page.getByText('No deliveries match.').waitFor();
  });

  it('replays, deletion requests, audiences, computed traits and transformations: none yet names the form that makes one', async () => {
    await page.goto(`${sy.url}/console#/replays?source=${source.id}`);
    const noDestination = page.getByText(/^This source has nothing to replay to: set its receivers on the Webhooks page or add a function on the Functions page first/);
    await noDestination.waitFor();
    assert.equal(await noDestination.getByRole('link', { name: 'Webhooks page' }).getAttribute('href'), `#/webhooks?source=${source.id}`);
    assert.equal(await noDestination.getByRole('link', { name: 'Functions page' }).getAttribute('href'), `#/functions?source=${source.id}`);
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: 'http://127.0.0.1:9/hook' }] } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    // Away and back: the replays page reads the destination as it opens.
    await page.goto(`${sy.url}/console#/overview`);
    const pages: Array<[string, RegExp]> = [
      [`#/replays?source=${source.id}`, /^No replays yet\. Start one with the form above/],
      ['#/regulations', /^No requests yet\. Create one with the form above/],
      ['#/audiences', /^No audiences yet\. Create one with the form below/],
      ['#/computed-traits', /^No computed traits yet\. Create one with the form below/],
      ['#/transformations', /^No transformations yet\. Write one with New transformation/],
    ];
    for (const [hash, says] of pages) {
      await page.goto(`${sy.url}/console${hash}`);
      await page.getByText(says).waitFor();
      await assertAccessible(page, `the empty ${hash}`);
    }
  });

  it('without any source, the sources page says how to make one, and the pages that need one link to it', async () => {
    for (const { id } of (await sy.admin('GET', '/sources')).body.sources) assert.equal((await sy.admin('DELETE', `/sources/${id}`)).status, 204);
    await page.goto(`${sy.url}/console#/sources`);
    await page.getByText(/^No sources yet\. Name one above and create it/).waitFor();
    for (const hash of ['#/webhooks', '#/debugger', '#/replays', '#/tracking-plan']) {
      await page.goto(`${sy.url}/console${hash}`);
      const hint = page.getByText(/^No source yet\./);
      await hint.waitFor();
      assert.equal(await hint.getByRole('link', { name: 'Create one' }).getAttribute('href'), '#/sources');
    }
    await assertAccessible(page, 'a page without sources');
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
