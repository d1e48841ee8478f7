import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';

/** console/src, from dist/test/console. */
const CONSOLE_SRC = path.resolve(import.meta.dirname, '..', '..', '..', 'console', 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.tsx?$/.test(entry.name) ? [full] : [];
  });
}

/** The console files a file imports (relative imports only; `.js` names the `.ts` or `.tsx` file). */
function importsOf(file: string, known: ReadonlySet<string>): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+)'/gm)) {
    const base = path.resolve(path.dirname(file), match[1]!).replace(/\.js$/, '');
    const target = [`${base}.ts`, `${base}.tsx`].find((candidate) => known.has(candidate));
    if (target !== undefined) found.push(target);
  }
  return found;
}

it('the console has no import cycle (pages navigate through route.ts, not main.tsx)', () => {
  const files = sourceFiles(CONSOLE_SRC);
  assert.ok(files.length > 10, `found the console's sources in ${CONSOLE_SRC}`);
  const known = new Set(files);
  const graph = new Map(files.map((file) => [file, importsOf(file, known)]));
  assert.ok((graph.get(path.join(CONSOLE_SRC, 'main.tsx')) ?? []).length > 5, 'the import reader sees main.tsx import its pages');
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const visit = (file: string, trail: string[]): void => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(file)), file].map((f) => path.relative(CONSOLE_SRC, f)).join(' → '));
      return;
    }
    state.set(file, 'open');
    for (const next of graph.get(file) ?? []) visit(next, [...trail, file]);
    state.set(file, 'done');
  };
  for (const file of files) visit(file, []);
  assert.deepEqual(cycles, []);
});
