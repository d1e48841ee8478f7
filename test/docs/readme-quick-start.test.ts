import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SETTINGS } from '../../src/config.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

/** Every line of the README's ```sh blocks, in order. */
async function shellLines(): Promise<string[]> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) => block[1]!.split('\n'));
}

/** The `NAME=value` assignments in front of a command line, as the settings' flags. */
function leadingSettings(line: string): Record<string, string> {
  const flags: Record<string, string> = {};
  for (const [, name, value] of line.matchAll(/(?:^|\s)([A-Z][A-Z0-9_]*)=(\S+)(?=\s)/g)) {
    const setting = Object.values(SETTINGS).find((s) => s.env === name);
    assert.ok(setting, `${name} is a setting`);
    flags[setting.flag] = value!;
  }
  return flags;
}

describe("the README's quick start reaches the README's local receiver", () => {
  let sy: TestSwitchyard;
  let start: string;

  before(async () => {
    const first = (await shellLines()).find((line) => /\bnpm start\b|\bswitchyard serve\b/.test(line));
    assert.ok(first, 'the README starts the server somewhere');
    start = first;
    sy = await startTestSwitchyard(leadingSettings(start));
  });
  after(async () => sy?.close());

  it('the first start sets what a receiver on 127.0.0.1 needs', async () => {
    const { id } = await sy.createSource('quick-start');
    const put = await sy.admin('PUT', `/sources/${id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: 'http://127.0.0.1:9000/in' }], sharedSecret: 's3cret' },
    });
    assert.equal(put.status, 200, `${start}: ${JSON.stringify(put.body)}`);
  });

  it('every CLI example pointing a receiver at this machine sets it too', async () => {
    const local = (await shellLines()).filter((line) => /switchyard webhooks set/.test(line) && /127\.0\.0\.1|localhost/.test(line));
    assert.ok(local.length > 0, 'the README shows the CLI with a local receiver');
    for (const line of local) assert.match(line, /SWITCHYARD_ALLOW_PRIVATE_RECEIVERS=true /, line);
  });
});
