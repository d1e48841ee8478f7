import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Page } from 'playwright-core';
import { describeBrowser } from '../helpers/browser.js';
import { type ConsoleSession, assertAccessible, screenshot, signedInConsole } from '../helpers/console-session.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, sourceWithWebhooks } from '../helpers/webhooks.js';

describeBrowser('the console: replays', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  let session: ConsoleSession;
  let page: Page;
  let source: { id: string; writeKey: string };

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
    source = await sourceWithWebhooks(sy, [receiver.url]);
    for (const event of ['Order Completed', 'Ping', 'Order Completed']) {
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event })).status, 200);
    }
    await receiver.waitFor(3);
    session = await signedInConsole(sy);
    page = session.page;
  });

  after(async () => {
    receiver?.release(200);
    await session?.close();
    await receiver?.close();
    await sy?.close();
  });

  it('starts a replay of some events of the last hour and shows it done with its counts', async () => {
    await page.goto(`${sy.url}/console#/replays?source=${source.id}`);
    await page.getByText('No replays yet.').waitFor();
    await page.getByLabel('Only these track events').fill('Order Completed');
    await page.getByRole('button', { name: 'Start replay' }).click();
    await page.getByRole('status').filter({ hasText: /Started replay \S+; its progress shows below/ }).waitFor();
    const replayed = (await receiver.waitFor(5)).slice(3);
    assert.deepEqual(replayed.map((r) => JSON.parse(r.body).event), ['Order Completed', 'Order Completed']);
    const [replay] = (await sy.admin('GET', `/sources/${source.id}/replays`)).body.replays;
    assert.ok(replayed.every((r) => r.headers['x-switchyard-replay'] === replay.id));
    // The list refreshes itself while the replay runs.
    await page.locator(`tr[data-replay-id="${replay.id}"]`).filter({ hasText: 'done' }).filter({ hasText: '2 delivered, 0 failed of 2 queued' }).waitFor();
    await assertAccessible(page, 'the replays page');
    await screenshot(page, 'replays');
  });

  it('cancels a running replay', async () => {
    receiver.reply = () => ({ hang: true });
    const replaysBefore = (await sy.admin('GET', `/sources/${source.id}/replays`)).body.replays.length;
    await page.getByLabel('Only these track events').fill('');
    await page.getByRole('button', { name: 'Start replay' }).click();
    // The previous test's "Started replay …" may still show until this one's answer: wait for this replay by its id.
    const replay = await eventually(async () => {
      const { replays } = (await sy.admin('GET', `/sources/${source.id}/replays`)).body;
      return replays.length > replaysBefore ? replays[0] : undefined;
    }, 10_000, 'the new replay');
    await page.getByRole('status').filter({ hasText: `Started replay ${replay.id}; its progress` }).waitFor();
    assert.equal(replay.status, 'running');
    await page.getByRole('button', { name: `Cancel replay ${replay.id}` }).click();
    await page.getByRole('status').filter({ hasText: `Cancelled replay ${replay.id}` }).waitFor();
    await page.locator(`tr[data-replay-id="${replay.id}"]`).filter({ hasText: 'cancelled' }).waitFor();
    assert.equal((await sy.admin('GET', `/replays/${replay.id}`)).body.status, 'cancelled');
    receiver.release(200);
    receiver.reply = () => ({ status: 200 });
    await eventually(() => (receiver.hanging() === 0 ? true : undefined), 5_000, 'hung requests answered');
  });

  it('replays to a function destination: ticked beside the receivers, or by default when the source has no Webhooks destination', async () => {
    const hook = await startReceiver();
    try {
      const code = `async function onTrack(event, settings) {
  await fetch(settings.url, { method: 'POST', body: JSON.stringify({ event: event.event, replay: event.context && event.context.replay }) });
}`;
      const addFunction = async (sourceId: string): Promise<string> => {
        const created = await sy.admin('POST', `/sources/${sourceId}/destinations/functions`, { name: 'Chat', code, settings: { url: hook.url } });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        return created.body.id as string;
      };
      // Beside the Webhooks destination: only what is ticked gets the replay.
      const functionId = await addFunction(source.id);
      const webhookPostsBefore = receiver.requests.length;
      await page.goto(`${sy.url}/console#/overview`);
      await page.goto(`${sy.url}/console#/replays?source=${source.id}`);
      await page.getByRole('group', { name: /^Send to \(none ticked: every receiver of the Webhooks destination\)/ }).waitFor();
      await page.getByLabel('Only these track events').fill('Ping');
      await page.getByRole('checkbox', { name: `function Chat (${functionId})` }).check();
      await page.getByRole('button', { name: 'Start replay' }).click();
      await page.getByRole('status').filter({ hasText: /Started replay \S+; its progress shows below/ }).waitFor();
      const [first] = await hook.waitFor(1);
      assert.equal(JSON.parse(first!.body).event, 'Ping');
      const [replay] = (await sy.admin('GET', `/sources/${source.id}/replays`)).body.replays;
      assert.deepEqual(replay.receivers, [functionId]);
      await page.locator(`tr[data-replay-id="${replay.id}"]`).filter({ hasText: 'done' }).filter({ hasText: '1 delivered, 0 failed of 1 queued' }).waitFor();
      assert.equal(receiver.requests.length, webhookPostsBefore, 'the Webhooks destination was not ticked: nothing replayed to it');
      await assertAccessible(page, 'the replays page with a function destination');

      // A source with only a function destination: nothing to tick, the replay goes to its functions.
      const app = await sy.createSource('app');
      assert.equal((await sy.send('/v1/track', app.writeKey, { userId: 'v', event: 'Opened' })).status, 200);
      const appFunction = await addFunction(app.id);
      await page.goto(`${sy.url}/console#/replays?source=${app.id}`);
      await page.getByText('No replays yet.').waitFor();
      assert.equal(await page.getByRole('group', { name: /^Send to/ }).count(), 0, 'one function: nothing to choose');
      await page.getByRole('button', { name: 'Start replay' }).click();
      await page.getByRole('status').filter({ hasText: /Started replay \S+; its progress shows below/ }).waitFor();
      const replayed = await hook.waitFor(2);
      assert.equal(JSON.parse(replayed[1]!.body).event, 'Opened');
      const [appReplay] = (await sy.admin('GET', `/sources/${app.id}/replays`)).body.replays;
      assert.deepEqual(appReplay.receivers, [appFunction]);
      await page.locator(`tr[data-replay-id="${appReplay.id}"]`).filter({ hasText: 'done' }).filter({ hasText: '1 delivered, 0 failed of 1 queued' }).waitFor();
    } finally {
      await hook.close();
    }
  });

  it('raised no script error in the page', () => {
    assert.deepEqual(session.pageErrors, []);
  });
});
