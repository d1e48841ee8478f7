import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { type TestSite, type TlsProxy, chromiumMissing, launchChromium, startSite, startTlsProxy } from '../helpers/chromium.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, sourceWithWebhooks } from '../helpers/webhooks.js';

const require = createRequire(import.meta.url);
/** An installed package's folder (not every package exports its package.json). */
function packageDir(name: string): string {
  let dir = path.dirname(require.resolve(name));
  while (!existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return dir;
}

/** Every page sends these five calls, whatever the library (their signatures agree). */
const CALLS_JS = `
window.sendEveryCall = function (analytics, who) {
  return [
    analytics.identify(who + '-user', { plan: 'pro' }),
    analytics.track('Order Completed', { total: 42 }),
    analytics.page('Docs', 'Home', { path: '/home' }),
    analytics.group(who + '-group', { name: 'Acme' }),
    analytics.alias(who + '-user-2', who + '-user'),
  ];
};`;
const TYPES = ['alias', 'group', 'identify', 'page', 'track'];

const page = (body: string): string =>
  `<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Shop</title></head><body>${body}</body></html>`;

/** analytics-next from its UMD build, given nothing but the write key and cdnURL (and, for batching, the strategy). */
const NEXT_PAGE = page(`<script src="/analytics-next.js"></script><script src="/calls.js"></script><script>
const q = new URLSearchParams(location.search);
const options = q.get('batching') === '1' ? { integrations: { 'Segment.io': { deliveryStrategy: { strategy: 'batching', config: { size: 5, timeout: 200 } } } } } : {};
window.done = AnalyticsNext.AnalyticsBrowser.load({ writeKey: q.get('writeKey'), cdnURL: q.get('switchyard') }, options)
  .then(([analytics]) => Promise.all(sendEveryCall(analytics, q.get('who'))))
  .then(() => 'sent', (error) => 'failed: ' + error);
</script>`);

/**
 * Segment's standard snippet (5.2.1), unchanged but for its CDN host, the
 * write key and the calls after load. The page's `ajs_aid` query parameter
 * makes analytics.js fetch one of its lazy chunks (its query-string
 * handler), from the path it derives from its own script's URL.
 */
const snippetPage = (switchyard: string, writeKey: string): string =>
  page(`<script src="/calls.js"></script><script>
!function(){var i="analytics",analytics=window[i]=window[i]||[];if(!analytics.initialize)if(analytics.invoked)window.console&&console.error&&console.error("Segment snippet included twice.");else{analytics.invoked=!0;analytics.methods=["trackSubmit","trackClick","trackLink","trackForm","pageview","identify","reset","group","track","ready","alias","debug","page","screen","once","off","on","addSourceMiddleware","addIntegrationMiddleware","setAnonymousId","addDestinationMiddleware","register"];analytics.factory=function(e){return function(){if(window[i].initialized)return window[i][e].apply(window[i],arguments);var n=Array.prototype.slice.call(arguments);if(["track","screen","alias","group","page","identify"].indexOf(e)>-1){var c=document.querySelector("link[rel='canonical']");n.push({__t:"bpc",c:c&&c.getAttribute("href")||void 0,p:location.pathname,u:location.href,s:location.search,t:document.title,r:document.referrer})}n.unshift(e);analytics.push(n);return analytics}};for(var n=0;n<analytics.methods.length;n++){var key=analytics.methods[n];analytics[key]=analytics.factory(key)}analytics.load=function(key,n){var t=document.createElement("script");t.type="text/javascript";t.async=!0;t.setAttribute("data-global-segment-analytics-key",i);t.src="${switchyard}/analytics.js/v1/" + key + "/analytics.min.js";var r=document.getElementsByTagName("script")[0];r.parentNode.insertBefore(t,r);analytics._loadOptions=n};analytics._writeKey="${writeKey}";;analytics.SNIPPET_VERSION="5.2.1";
analytics.load("${writeKey}");
sendEveryCall(analytics, "snippet");
}}();
</script>`);

/** RudderStack's JS SDK v3 (its npm "bundled" build, so no plugin comes from its CDN) with only dataPlaneUrl and configUrl. */
const RUDDER_PAGE = page(`<script src="/rudder.js"></script><script src="/calls.js"></script><script>
const q = new URLSearchParams(location.search);
const switchyard = q.get('switchyard');
const analytics = new rudderanalytics.RudderAnalytics();
// Beacon mode flushes every 10 minutes or on leaving the page by default; 200 ms keeps the test short.
const beacon = q.get('beacon') === '1' ? { useBeacon: true, beaconQueueOptions: { flushQueueInterval: 200 } } : {};
analytics.load(q.get('writeKey'), switchyard, { configUrl: switchyard, ...beacon });
sendEveryCall(analytics, q.get('who'));
</script>`);

const missing = chromiumMissing();

describe('browser libraries in Chromium, from another origin', { skip: missing }, () => {
  let sy: TestSwitchyard;
  let proxy: TlsProxy;
  let browser: Browser;
  let site: TestSite;
  const files = new Map<string, { type: string; body: string | Buffer }>();
  const receivers: TestReceiver[] = [];

  before(async () => {
    // trust-proxy: behind the TLS proxy, settings must say https and the proxy's host.
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'trust-proxy': 'true' });
    proxy = await startTlsProxy(sy.port);
    browser = await launchChromium();
    const js = 'application/javascript; charset=utf-8';
    files.set('/calls.js', { type: js, body: CALLS_JS });
    files.set('/analytics-next.js', { type: js, body: await readFile(path.join(packageDir('@segment/analytics-next'), 'dist', 'umd', 'index.js')) });
    files.set('/rudder.js', { type: js, body: await readFile(path.join(packageDir('@rudderstack/analytics-js'), 'dist', 'npm', 'modern', 'bundled', 'umd', 'index.js')) });
    files.set('/next.html', { type: 'text/html', body: NEXT_PAGE });
    files.set('/rudder.html', { type: 'text/html', body: RUDDER_PAGE });
    site = await startSite(files);
  });
  after(async () => {
    await browser?.close();
    await site?.close();
    await proxy?.close();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await sy?.close();
  });

  /**
   * Opens `pagePath` on the site for a new source whose Webhooks destination
   * posts to a new receiver; waits for five messages at the receiver and
   * every delivery to be done, and checks that each call arrived once and
   * that the page reached no host but the site's and Switchyard's.
   */
  async function sendsEveryCallOnce(pagePath: string, switchyardUrl: string, who: string, setup?: (writeKey: string) => void): Promise<{ requested: string[] }> {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const source = await sourceWithWebhooks(sy, [receiver.url]);
    setup?.(source.writeKey);
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const requested: string[] = [];
    const problems: string[] = [];
    context.on('request', (request) => requested.push(`${request.method()} ${request.url()}`));
    context.on('requestfailed', (request) => problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`));
    context.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    try {
      const tab = await context.newPage();
      const query = new URLSearchParams({ writeKey: source.writeKey, switchyard: switchyardUrl, who });
      await tab.goto(`${site.url}${pagePath}${pagePath.includes('?') ? '&' : '?'}${query.toString()}`);
      let received;
      try {
        received = await receiver.waitFor(TYPES.length, 30_000);
      } catch (error) {
        throw new Error(`${String(error)}\nproblems: ${problems.join('\n')}\nrequests: ${requested.join('\n')}`);
      }
      await eventually(async () => {
        const deliveries = await listDeliveries(sy, source.id);
        return deliveries.length >= TYPES.length && deliveries.every((d) => d.status === 'succeeded') ? true : undefined;
      }, 10_000, 'every delivery done');

      const messages = received.map((request) => JSON.parse(request.body));
      assert.equal(receiver.requests.length, TYPES.length, 'each call reached the receiver exactly once');
      assert.deepEqual(messages.map((m) => m.type).sort(), TYPES);
      assert.equal(new Set(messages.map((m) => m.messageId)).size, TYPES.length);
      const byType = Object.fromEntries(messages.map((m) => [m.type, m]));
      assert.equal(byType.identify.userId, `${who}-user`);
      // (RudderStack's SDK sends identify traits in context.traits.)
      assert.equal(byType.identify.traits?.plan ?? byType.identify.context.traits?.plan, 'pro', JSON.stringify(byType.identify));
      assert.equal(byType.track.event, 'Order Completed');
      assert.equal(byType.track.properties.total, 42);
      assert.equal(byType.page.name, 'Home');
      assert.equal(byType.group.groupId, `${who}-group`);
      // (analytics-next puts the identified user's id on every event, alias included: only previousId is the call's own.)
      assert.equal(byType.alias.previousId, `${who}-user`);
      for (const message of messages) assert.equal(message.context.ip, '127.0.0.1', 'browser calls get the request IP');

      const allowed = new Set([site.origin, new URL(switchyardUrl).origin]);
      const elsewhere = requested.filter((line) => {
        const url = line.slice(line.indexOf(' ') + 1);
        return !url.startsWith('data:') && !allowed.has(new URL(url).origin);
      });
      assert.deepEqual(elsewhere, [], 'no request to any other host');
      assert.deepEqual(problems, [], 'no failed request or console error');
      return { requested };
    } finally {
      await context.close();
    }
  }

  it('analytics-next loaded with only cdnURL = Switchyard', async () => {
    const { requested } = await sendsEveryCallOnce('/next.html', sy.url, 'next');
    assert.ok(requested.some((line) => line.startsWith(`GET ${sy.url}/v1/projects/`)), 'settings came from Switchyard');
  });

  it('analytics-next batching (/v1/b)', async () => {
    const { requested } = await sendsEveryCallOnce('/next.html?batching=1', sy.url, 'batching');
    assert.ok(requested.some((line) => line === `POST ${sy.url}/v1/b`), 'sent as a batch');
  });

  it("Segment's standard snippet with only its host changed (Switchyard behind TLS)", async () => {
    const { requested } = await sendsEveryCallOnce('/snippet.html?ajs_aid=snippet-anonymous', proxy.url, 'snippet', (writeKey) => {
      files.set('/snippet.html', { type: 'text/html', body: snippetPage(proxy.url, writeKey) });
    });
    assert.ok(requested.some((line) => line.startsWith(`GET ${proxy.url}/analytics.js/v1/`)), 'the library came from Switchyard');
    assert.ok(requested.some((line) => line.startsWith(`GET ${proxy.url}/analytics-next/bundles/`)), 'a lazy chunk came from Switchyard');
    assert.ok(requested.some((line) => line.startsWith(`POST ${proxy.url}/v1/`)), 'events went through the proxy, over https');
  });

  it('RudderStack JS SDK v3, XHR mode, with only dataPlaneUrl and configUrl', async () => {
    const { requested } = await sendsEveryCallOnce('/rudder.html', sy.url, 'rudder-xhr');
    assert.ok(requested.some((line) => line.startsWith(`GET ${sy.url}/sourceConfig/`)), 'config came from Switchyard');
    assert.ok(requested.some((line) => line.startsWith(`POST ${sy.url}/v1/track`)), 'sent with XHR');
  });

  it('RudderStack JS SDK v3, beacon mode', async () => {
    const { requested } = await sendsEveryCallOnce('/rudder.html?beacon=1', sy.url, 'rudder-beacon');
    assert.ok(requested.some((line) => line.startsWith(`POST ${sy.url}/beacon/v1/batch?writeKey=`)), 'sent with sendBeacon');
  });
});
