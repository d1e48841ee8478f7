#!/usr/bin/env node
// Runs every compiled test file (dist/test/**/*.test.js) with Node's test runner.
// Node 20's runner takes no globs, so the files are listed here.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', 'dist', 'test');
const only = process.argv.slice(2);

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return find(full);
    return entry.name.endsWith('.test.js') ? [full] : [];
  });
}

const files = find(root)
  .filter((file) => only.length === 0 || only.some((word) => file.includes(word)))
  .sort();
if (files.length === 0) {
  console.error(`no test files under ${root}${only.length ? ` matching ${only.join(', ')}` : ''}`);
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--no-node-snapshot', '--test', `--test-concurrency=${Math.max(2, availableParallelism())}`, '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
