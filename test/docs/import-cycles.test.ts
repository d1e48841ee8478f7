import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import ts from 'typescript';

/** The repository, from dist/test/docs. */
const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
/** Every folder of TypeScript the project compiles. */
const FOLDERS = ['src', 'console/src', 'bench', 'chaos', 'test'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.tsx?$/.test(entry.name))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/**
 * The project files a file imports, as the compiler scans them: static
 * imports (type-only too), re-exports and `import()`. A type-only or lazy
 * edge does not fail at load time, but it still ties two modules into one:
 * neither can be understood, tested or moved without the other.
 */
function importsOf(file: string, known: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const base = path.resolve(path.dirname(file), fileName).replace(/\.js$/, '');
    const target = [`${base}.ts`, `${base}.tsx`].find((candidate) => known.has(candidate));
    if (target !== undefined) found.push(target);
  }
  return found;
}

/** Each cycle once, as `a → b → a`, found by a depth-first walk. */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const trail: string[] = [];
  const visit = (file: string): void => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(file)), file].map((f) => path.relative(ROOT, f)).join(' → '));
      return;
    }
    state.set(file, 'open');
    trail.push(file);
    for (const next of graph.get(file) ?? []) visit(next);
    trail.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) visit(file);
  return cycles;
}

it('no TypeScript file of the project imports itself through others (src, console, bench, chaos, test)', () => {
  const files = FOLDERS.flatMap((folder) => sourceFiles(path.join(ROOT, folder)));
  const known = new Set(files);
  const graph = new Map(files.map((file) => [file, importsOf(file, known)]));
  // The reader sees imports of every kind: .ts and .tsx, static, type-only and lazy.
  assert.ok((graph.get(path.join(ROOT, 'console', 'src', 'main.tsx')) ?? []).length > 5, "main.tsx's pages");
  const telemetry = (name: string): string => path.join(ROOT, 'src', 'telemetry', name);
  assert.ok(graph.get(telemetry('otel-tracing.ts'))?.includes(telemetry('tracing.ts')), 'a type-only import');
  assert.ok(graph.get(telemetry('start-tracing.ts'))?.includes(telemetry('otel-tracing.ts')), 'an import()');
  assert.deepEqual(cyclesOf(graph), []);
});
