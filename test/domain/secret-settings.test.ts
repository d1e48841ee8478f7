import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MASKED_SETTING, maskSettings, redact, secretValues } from '../../src/domain/function-settings.js';
import { isSecretHeader, keepMaskedHeaders, maskReceivers } from '../../src/domain/webhook-settings.js';

describe('secret settings', () => {
  it("take every string under a secret-looking function setting, at any depth, out of the attempt's logs", () => {
    const settings = { url: 'https://api.example/x', auth: { user: 'svc-user', password: 'pw-nested-1', scopes: ['scope-read', 'ab'] }, apiKey: 'sk_top', retries: 3 };
    const secrets = secretValues(settings);
    for (const secret of ['svc-user', 'pw-nested-1', 'scope-read', 'sk_top']) assert.ok(secrets.includes(secret), secret);
    assert.ok(!secrets.includes('ab'), 'shorter than 4 characters: not taken');
    assert.ok(!secrets.some((s) => s.includes('api.example')), 'ordinary settings are not secrets');
    const logged = `settings ${JSON.stringify(settings.auth)} then https://h/?p=${encodeURIComponent('pw-nested-1')}`;
    const shown = redact(logged, secrets);
    assert.doesNotMatch(shown, /pw-nested-1|svc-user|scope-read/);
    assert.equal(maskSettings(settings)['auth'], MASKED_SETTING, 'read back as one mask, as before');
  });

  it('mask credential-looking static headers on read, and keep the stored value for a mask sent back to the same receiver', () => {
    for (const name of ['Authorization', 'X-Api-Key', 'Cookie', 'X-Auth-Token', 'X-Client-Secret', 'Proxy-Authorization']) assert.ok(isSecretHeader(name), name);
    for (const name of ['X-Team', 'Accept', 'X-Request-Source']) assert.ok(!isSecretHeader(name), name);
    const stored = [{ url: 'https://r.example/a', headers: { Authorization: 'Bearer t', 'X-Team': 'ops' } }];
    assert.deepEqual(maskReceivers(stored), [{ url: 'https://r.example/a', headers: { Authorization: '********', 'X-Team': 'ops' } }]);
    assert.strictEqual(maskReceivers([{ url: 'https://r.example/b', headers: { 'X-Team': 'ops' } }])[0]!.headers['X-Team'], 'ops');

    const kept = keepMaskedHeaders([{ url: 'https://R.example:443/a', headers: { authorization: '********', 'X-Team': 'dev' } }], stored);
    assert.deepEqual(kept, { ok: true, webhooks: [{ url: 'https://R.example:443/a', headers: { authorization: 'Bearer t', 'X-Team': 'dev' } }] });
    // The mask under a header that is not credential-looking is a value like any other.
    assert.deepEqual(keepMaskedHeaders([{ url: 'https://r.example/a', headers: { 'X-Team': '********' } }], stored), {
      ok: true,
      webhooks: [{ url: 'https://r.example/a', headers: { 'X-Team': '********' } }],
    });
    const elsewhere = keepMaskedHeaders([{ url: 'https://other.example/a', headers: { Authorization: '********' } }], stored);
    assert.equal(elsewhere.ok, false);
    assert.match(elsewhere.ok ? '' : elsewhere.problem, /settings\.webhooks\[0\]\.headers: "Authorization" is the mask/);
    // Not an array: left for the settings' own check to refuse.
    assert.deepEqual(keepMaskedHeaders('nope', stored), { ok: true, webhooks: 'nope' });
  });
});
