import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../helpers/child-switchyard.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

/** The README's local receiver: the ```js block that starts with `// receiver.mjs`. */
async function receiverRecipe(): Promise<string> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const block = /```js\n(\/\/ receiver\.mjs[^\n]*\n[\s\S]*?)```/.exec(readme);
  assert.ok(block, 'README.md has the receiver.mjs recipe');
  return block[1]!;
}

describe("the README's local receiver recipe", () => {
  let sy: TestSwitchyard;
  let dir: string;
  let output = '';
  let stopReceiver: () => void = () => {};
  let receiverUrl: string;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'switchyard-recipe-'));
    await writeFile(path.join(dir, 'receiver.mjs'), await receiverRecipe());
    const port = await freePort();
    const child = spawn(process.execPath, ['receiver.mjs'], { cwd: dir, env: { ...process.env, SHARED_SECRET: 's3cret', RECEIVER_PORT: String(port) } });
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    stopReceiver = () => child.kill();
    receiverUrl = `http://127.0.0.1:${port}/in`;
    await eventually(() => fetch(receiverUrl, { method: 'POST', body: '{}' }).then(() => true, () => undefined), 10_000, 'the receiver to listen');
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
  });
  after(async () => {
    stopReceiver();
    await sy?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('answers 401 to a POST without a valid signature', async () => {
    const forged = await fetch(receiverUrl, { method: 'POST', headers: { 'x-signature': 'a'.repeat(40) }, body: '{"event":"forged"}' });
    assert.equal(forged.status, 401);
    await eventually(() => (output.includes('BAD SIGNATURE POST /in {"event":"forged"}') ? true : undefined), 5_000, 'the receiver to print it');
  });

  it('prints a signed delivery from Switchyard as "signed", with its body', async () => {
    const { id, writeKey } = await sy.createSource('recipe');
    const put = await sy.admin('PUT', `/sources/${id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: receiverUrl, headers: { 'X-Key': 'v' } }], sharedSecret: 's3cret' },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    // Non-ASCII text: the signature must be over the bytes as sent.
    const sent = await sy.send('/v1/track', writeKey, { userId: 'u1', event: 'Signed Up', properties: { plan: 'pro', city: 'Zürich' } });
    assert.equal(sent.status, 200);
    const line = await eventually(() => output.split('\n').find((l) => l.includes('"event":"Signed Up"')), 10_000, 'the delivery to be printed');
    assert.match(line, /^signed POST \/in \{/);
    assert.ok(line.includes('"city":"Zürich"'), line);
  });
});
