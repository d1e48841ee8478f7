import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { startReceiver, startSelfSignedReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/**
 * Ports WHATWG `fetch` refuses ("bad ports", as browsers do) that an
 * unprivileged server may listen on: a subset of undici's list, above 1024.
 */
const BLOCKED_PORTS = [6000, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080, 4190, 5060, 5061, 3659, 2049, 1719, 1720, 1723, 4045, 6566];

/** A real Switchyard on the first of {@link BLOCKED_PORTS} that is free now; fails, saying so, when none is. */
async function startOnBlockedPort(): Promise<TestSwitchyard> {
  const taken: number[] = [];
  for (const port of BLOCKED_PORTS) {
    try {
      return await startTestSwitchyard({ port: String(port) });
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'EADDRINUSE') throw error;
      taken.push(port);
    }
  }
  throw new Error(`no port of fetch's blocked list is free on 127.0.0.1 (tried ${taken.join(', ')}): free one of them to run this test`);
}

/** The reported trap: `PORT=6000 switchyard serve` ran, and no CLI command could reach it (`fetch failed`, "bad port"). */
describe('CLI --url on a port fetch blocks (cli-blocked-port)', () => {
  let sy: TestSwitchyard;
  const env = { SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN };

  before(async () => {
    sy = await startOnBlockedPort();
  });
  after(async () => {
    await sy?.close();
  });

  it('fetch refuses the port (the premise), the CLI reaches the server there: sources create, then list', { timeout: 60_000 }, async () => {
    await assert.rejects(fetch(`${sy.url}/healthz`), (error: Error & { cause?: { message?: string } }) => {
      assert.match(String(error.cause?.message), /bad port/);
      return true;
    });

    const created = await runCli(['sources', 'create', 'on-a-blocked-port', '--url', sy.url], env);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.json.name, 'on-a-blocked-port');
    assert.equal(created.stderr.trim(), `switchyard: using server ${sy.url}`);

    const listed = await runCli(['sources', 'list', '--url', sy.url], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual((listed.json.sources as Array<{ name: string }>).map((s) => s.name).sort(), ['default', 'on-a-blocked-port']);
    assert.doesNotMatch(listed.stdout + listed.stderr, new RegExp(TEST_ADMIN_TOKEN), 'the token is never printed');

    // Errors still come as one line: a wrong token on the same port.
    const refused = await runCli(['sources', 'list', '--url', sy.url], { SWITCHYARD_ADMIN_TOKEN: 'not-the-admin-token-000' });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /refused the admin token \(401\)/);
  });

  it('it still follows no redirect (the token stays home) and verifies TLS certificates', { timeout: 60_000 }, async () => {
    const elsewhere = await startReceiver();
    const redirecting = await startReceiver();
    const selfSigned = await startSelfSignedReceiver();
    try {
      redirecting.reply = () => ({ status: 307, headers: { location: `http://127.0.0.1:${elsewhere.port}/admin/v1/sources` } });
      const redirected = await runCli(['sources', 'list', '--url', `http://127.0.0.1:${redirecting.port}`], env);
      assert.equal(redirected.code, 1);
      assert.match(redirected.stderr, /answered 307, a redirect to .*; redirects are not followed/);
      assert.equal(redirecting.requests.length, 1);
      assert.equal(elsewhere.requests.length, 0, 'the redirect was not followed');

      const untrusted = await runCli(['sources', 'list', '--url', `https://127.0.0.1:${selfSigned.port}`], env);
      assert.equal(untrusted.code, 1);
      assert.match(untrusted.stderr, /cannot reach the server at https:\/\/127\.0\.0\.1:\d+ \(--url\): its TLS certificate is self-signed/);
      assert.equal(selfSigned.requests.length, 0, 'nothing, the token least of all, was sent over the unverified connection');
    } finally {
      await Promise.all([elsewhere.close(), redirecting.close(), selfSigned.close()]);
    }
  });
});
