import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

/** The README's function: the ```js block that starts with `// chat-function.js`. */
async function functionRecipe(): Promise<string> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const block = /```js\n(\/\/ chat-function\.js[^\n]*\n[\s\S]*?)```/.exec(readme);
  assert.ok(block, 'README.md has the chat-function.js example');
  return block[1]!;
}

/**
 * A local stand-in of a chat tool's incoming-webhook API, as Slack's
 * behaves: POST /services/<team>/<bot>/<token> with a JSON `{text}` answers
 * 200 "ok"; an unknown hook 404 "no_service"; a body without text 400
 * "no_text"; the first request for `/busy/` hooks 429 with Retry-After.
 */
async function startChatStandIn(): Promise<{ url: string; messages: Array<{ path: string; text: string }>; close(): Promise<void> }> {
  const messages: Array<{ path: string; text: string }> = [];
  let busySeen = false;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (req.method !== 'POST' || !/^\/services\/T0001\/B0001\/(secret-hook|busy)$/.test(req.url ?? '')) return res.writeHead(404).end('no_service');
      if (req.url!.endsWith('/busy') && !busySeen) {
        busySeen = true;
        return res.writeHead(429, { 'retry-after': '0' }).end('rate_limited');
      }
      let text: unknown;
      try {
        text = (JSON.parse(body) as { text?: unknown }).text;
      } catch {
        return res.writeHead(400).end('invalid_payload');
      }
      if (req.headers['content-type'] !== 'application/json' || typeof text !== 'string') return res.writeHead(400).end('no_text');
      messages.push({ path: req.url!, text });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, messages, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe("the README's function destination example", () => {
  let sy: TestSwitchyard;
  let chat: Awaited<ReturnType<typeof startChatStandIn>>;

  before(async () => {
    chat = await startChatStandIn();
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '20', 'retry-max-delay-ms': '200' });
  });
  after(async () => {
    await sy?.close();
    await chat?.close();
  });

  it('posts a Slack-style {text} message for each signup, retries a 429, and fails on an unknown hook', async () => {
    const code = await functionRecipe();
    const source = await sy.createSource('readme-function');
    const created = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'Chat', code, settings: { secretWebhookUrl: `${chat.url}/services/T0001/B0001/secret-hook` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.settings.secretWebhookUrl, '********');
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Signed Up', properties: { plan: 'pro' }, traits: { email: 'ann@example.com' } });
    await sy.send('/v1/track', source.writeKey, { userId: 'u2', event: 'Page Scrolled', properties: {} });
    await sy.send('/v1/identify', source.writeKey, { userId: 'u2', traits: { plan: 'free' } });
    await eventually(() => (chat.messages.length > 0 ? true : undefined));
    assert.deepEqual(chat.messages, [{ path: '/services/T0001/B0001/secret-hook', text: ':tada: ann@example.com signed up for the pro plan' }]);
    const deliveries = (await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries as any[];
    const done = await eventually(async () => {
      const all = (await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries as any[];
      return all.every((d) => d.status === 'succeeded') ? all : undefined;
    });
    assert.equal(done.length, deliveries.length);
    const identify = await eventually(async () => {
      for (const d of done) {
        const detail = (await sy.admin('GET', `/deliveries/${d.id}`)).body;
        if (detail.attempts[0]?.function.logs[0]?.startsWith('identify')) return detail;
      }
      return undefined;
    });
    assert.deepEqual(identify.attempts[0].function.logs, ['identify ignored for u2']);

    // The chat tool rate-limits once: RetryError, then delivered.
    const busy = await sy.admin('POST', '/functions/test', { code, settings: { secretWebhookUrl: `${chat.url}/services/T0001/B0001/busy` }, events: [{ type: 'track', event: 'Signed Up', userId: 'u3', properties: { plan: 'team' } }] });
    assert.equal(busy.body.results[0].outcome, 'retry');
    assert.equal(busy.body.results[0].errorType, 'RetryError');
    assert.equal(busy.body.results[0].fetches[0].url, '********', 'the secret URL is masked in the record');
    // An unknown hook: a failure, not retried.
    const unknown = await sy.admin('POST', '/functions/test', { code, settings: { secretWebhookUrl: `${chat.url}/services/T0001/B0001/gone` }, events: [{ type: 'track', event: 'Signed Up', userId: 'u3', properties: { plan: 'team' } }] });
    assert.equal(unknown.body.results[0].outcome, 'failed');
    assert.match(unknown.body.results[0].error, /chat answered 404: no_service/);
  });
});
