import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { it } from 'node:test';
import { ERROR_CODES } from '../../src/errors.js';

const DOC = path.resolve(import.meta.dirname, '..', '..', '..', 'docs', 'errors.md');

it('docs/errors.md lists exactly the error codes the code has, with their statuses', async () => {
  const text = await readFile(DOC, 'utf8');
  const documented = new Map<string, number>();
  for (const match of text.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)) documented.set(match[1]!, Number(match[2]));
  assert.deepEqual(Object.fromEntries([...documented].sort()), Object.fromEntries(Object.entries(ERROR_CODES).sort()));
});
