import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/** A public address written as a literal, so nothing is resolved and nothing is sent. */
const PUBLIC_URL = 'https://93.184.215.14/hook';

describe('Webhooks destination settings', () => {
  let sy: TestSwitchyard;
  let sourceId: string;
  const put = (settings: unknown, extra: Record<string, unknown> = {}) =>
    sy.admin('PUT', `/sources/${sourceId}/destinations/webhooks`, { enabled: true, settings, ...extra });

  before(async () => {
    sy = await startTestSwitchyard({}); // private receivers not allowed
    sourceId = (await sy.createSource('settings')).id;
  });
  after(async () => {
    await sy?.close();
  });

  it('stores 1 to 5 receivers with headers and shows the secret masked', async () => {
    assert.equal((await sy.admin('GET', `/sources/${sourceId}/destinations/webhooks`)).status, 404, 'none before the first PUT');
    const webhooks = [1, 2, 3, 4, 5].map((n) => ({ url: `${PUBLIC_URL}${n}?a=b`, headers: { 'X-Key': `v${n}`, Authorization: 'Bearer t' } }));
    const saved = await put({ webhooks, sharedSecret: 's3cret' });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    const read = await sy.admin('GET', `/sources/${sourceId}/destinations/webhooks`);
    assert.equal(read.status, 200);
    assert.equal(read.body.enabled, true);
    // Credential-looking static headers are masked like the secret.
    assert.deepEqual(
      read.body.settings.webhooks,
      webhooks.map((w) => ({ ...w, headers: { 'X-Key': '********', Authorization: '********' } })),
    );
    assert.equal(read.body.settings.sharedSecret, '********');
    assert.ok(!JSON.stringify(read.body).includes('s3cret'));
    assert.ok(!JSON.stringify(read.body).includes('Bearer t'));

    // A GET edited and PUT back carries the masks: the stored secret and headers stay.
    const again = await sy.admin('PUT', `/sources/${sourceId}/destinations/webhooks`, { enabled: false, settings: read.body.settings });
    assert.equal(again.status, 200);
    const stored = await sy.store.getDestination(sourceId, 'webhooks');
    assert.equal((stored!.settings as any).sharedSecret, 's3cret');
    assert.deepEqual((stored!.settings as any).webhooks, webhooks);
    assert.equal(stored!.enabled, false);
  });

  it('keeps a masked static header only for the receiver that has it stored, and shows other headers as they are', async () => {
    const source = (await sy.createSource('header-masks')).id;
    const path = `/sources/${source}/destinations/webhooks`;
    const first = { url: `${PUBLIC_URL}a`, headers: { 'x-api-key': 'k-first', 'X-Team': 'ops' } };
    assert.equal((await sy.admin('PUT', path, { settings: { webhooks: [first] } })).status, 200);
    const shown = (await sy.admin('GET', path)).body.settings.webhooks;
    assert.deepEqual(shown, [{ url: first.url, headers: { 'x-api-key': '********', 'X-Team': 'ops' } }]);

    // The mask under another URL, or under a header the receiver never had, has nothing to keep: refused, naming it.
    for (const webhooks of [[{ url: `${PUBLIC_URL}b`, headers: { 'x-api-key': '********' } }], [{ url: first.url, headers: { Authorization: '********' } }]]) {
      const refused = await sy.admin('PUT', path, { settings: { webhooks } });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, 'invalid_receivers');
      assert.match(refused.body.error.message, /settings\.webhooks\[0\]\.headers: "(x-api-key|Authorization)" is the mask \*{8}, but this receiver has no stored value/);
    }
    // Matched by URL (normalized) and header name in any case, whatever the receivers' order.
    const added = { url: `${PUBLIC_URL}c`, headers: { 'X-Token': 't-new' } };
    assert.equal((await sy.admin('PUT', path, { settings: { webhooks: [added, { url: first.url.replace('93.184.215.14/', '93.184.215.14:443/'), headers: { 'X-API-KEY': '********' } }] } })).status, 200);
    const stored = (await sy.store.getDestination(source, 'webhooks'))!.settings as any;
    assert.deepEqual(stored.webhooks, [added, { url: first.url, headers: { 'X-API-KEY': 'k-first' } }]);
    // A new value replaces the stored one.
    assert.equal((await sy.admin('PUT', path, { settings: { webhooks: [{ url: first.url, headers: { 'x-api-key': 'k-second' } }] } })).status, 200);
    assert.deepEqual(((await sy.store.getDestination(source, 'webhooks'))!.settings as any).webhooks, [{ url: first.url, headers: { 'x-api-key': 'k-second' } }]);
  });

  it('refuses the secret\'s mask when no secret is stored for it to keep, rather than saving an unsigned destination', async () => {
    const source = (await sy.createSource('secret-mask')).id;
    const path = `/sources/${source}/destinations/webhooks`;
    // As a README example copied onto a new destination would send it.
    const refused = await sy.admin('PUT', path, { settings: { webhooks: [{ url: PUBLIC_URL }], sharedSecret: '********' } });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'invalid_receivers');
    assert.match(refused.body.error.message, /settings\.sharedSecret is the mask \*{8}, but no secret is stored for it to keep; send the secret itself/);
    assert.equal((await sy.admin('GET', path)).status, 404, 'nothing saved');
    // Unsigned on purpose: without sharedSecret. Then the mask of a stored secret keeps it.
    assert.equal((await sy.admin('PUT', path, { settings: { webhooks: [{ url: PUBLIC_URL }] } })).status, 200);
    assert.equal((await sy.admin('PUT', path, { settings: { webhooks: [{ url: PUBLIC_URL }], sharedSecret: '********' } })).status, 400, 'still nothing to keep');
    assert.equal((await sy.admin('PUT', path, { settings: { webhooks: [{ url: PUBLIC_URL }], sharedSecret: 'set-now' } })).status, 200);
    const kept = await sy.admin('PUT', path, { settings: { webhooks: [{ url: PUBLIC_URL }], sharedSecret: '********' } });
    assert.equal(kept.status, 200, JSON.stringify(kept.body));
    assert.equal(((await sy.store.getDestination(source, 'webhooks'))!.settings as any).sharedSecret, 'set-now');
  });

  const invalid: Array<[string, unknown, RegExp]> = [
    ['no receivers', { webhooks: [] }, /1 to 5 receivers/],
    ['six receivers', { webhooks: [1, 2, 3, 4, 5, 6].map((n) => ({ url: `${PUBLIC_URL}${n}` })) }, /1 to 5 receivers \(got 6\)/],
    ['an ftp URL', { webhooks: [{ url: 'ftp://93.184.215.14/x' }] }, /http or https, not ftp/],
    ['a relative URL', { webhooks: [{ url: '/hook' }] }, /not a valid URL/],
    ['port 0', { webhooks: [{ url: 'https://93.184.215.14:0/hook' }] }, /settings\.webhooks\[0\]\.url has port 0/],
    ['credentials in the URL', { webhooks: [{ url: 'https://user:pw@93.184.215.14/' }] }, /credentials/],
    ['a header name with a space', { webhooks: [{ url: PUBLIC_URL, headers: { 'Bad Header': 'v' } }] }, /not a valid HTTP header name/],
    ['a header value with a line break', { webhooks: [{ url: PUBLIC_URL, headers: { 'X-A': 'v\r\nX-Injected: 1' } }] }, /cannot/],
    ['a non-string header value', { webhooks: [{ url: PUBLIC_URL, headers: { 'X-A': 1 } }] }, /must be a string/],
    ['Content-Type as a static header', { webhooks: [{ url: PUBLIC_URL, headers: { 'content-type': 'text/plain' } }] }, /set by Switchyard/],
    ['X-Signature as a static header', { webhooks: [{ url: PUBLIC_URL, headers: { 'X-Signature': 'forged' } }] }, /set by Switchyard/],
    ['Host as a static header', { webhooks: [{ url: PUBLIC_URL, headers: { Host: 'x' } }] }, /set by Switchyard/],
    ['Transfer-Encoding as a static header', { webhooks: [{ url: PUBLIC_URL, headers: { 'Transfer-Encoding': 'chunked' } }] }, /set by Switchyard/],
    ['the same receiver twice', { webhooks: [{ url: PUBLIC_URL }, { url: PUBLIC_URL }] }, /repeats/],
    ['a non-string secret', { webhooks: [{ url: PUBLIC_URL }], sharedSecret: 42 }, /sharedSecret/],
    ['no settings', undefined, /settings must be an object/],
  ];
  for (const [what, settings, message] of invalid) {
    it(`refuses ${what} with invalid_receivers`, async () => {
      const answer = await put(settings);
      assert.equal(answer.status, 400);
      assert.equal(answer.body.error.code, 'invalid_receivers');
      assert.match(answer.body.error.message, message);
    });
  }

  for (const host of ['127.0.0.1', 'localhost', '10.1.2.3', '169.254.169.254', '[::1]', '[fd00:ec2::254]', '[::ffff:10.0.0.1]', '100.64.0.1', '[100::1]', '[::ffff:0:7f00:1]', '[::ffff:0:a00:1]']) {
    it(`refuses a receiver on ${host} with private_receiver`, async () => {
      const answer = await put({ webhooks: [{ url: PUBLIC_URL }, { url: `http://${host}:8080/hook` }] });
      assert.equal(answer.status, 400);
      assert.equal(answer.body.error.code, 'private_receiver');
      assert.match(answer.body.error.message, /settings\.webhooks\[1\]\.url/);
    });
  }

  it('answers a bad body, an unknown source and bad fields with typed errors', async () => {
    assert.equal((await put({ webhooks: [{ url: PUBLIC_URL }] }, { enabled: 'yes' })).body.error.code, 'invalid_request');
    assert.equal((await put({ webhooks: [{ url: PUBLIC_URL }] }, { color: 'red' })).body.error.code, 'invalid_request');
    const unknown = await sy.admin('PUT', '/sources/src_nope/destinations/webhooks', { settings: { webhooks: [{ url: PUBLIC_URL }] } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'not_found');
    assert.equal((await sy.admin('GET', '/sources/src_nope/destinations/webhooks')).status, 404);
  });
});
