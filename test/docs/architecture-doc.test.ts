import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { it } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const SRC = path.join(ROOT, 'src');

interface Row {
  /** Paths relative to `src/`: a folder ends with `/`, a file does not. */
  readonly owns: readonly string[];
  /** What its files may import from outside the row; `undefined`: everything. */
  readonly mayImport: readonly string[] | undefined;
}

/** The "Where things are" table of docs/architecture.md, rows under `src/` only. */
async function layering(): Promise<Row[]> {
  const text = await readFile(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const section = text.split(/^## /m).find((part) => part.startsWith('Where things are'));
  assert.ok(section, 'docs/architecture.md has a "Where things are" section');
  const rows: Row[] = [];
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `src/')) continue;
    const cells = line.split(' | ').map((cell) => cell.replace(/^\| |\s*\|$/g, '').trim());
    assert.equal(cells.length, 3, `three cells in: ${line}`);
    const owns = [...cells[0]!.matchAll(/`src\/([^`]+)`/g)].map((m) => m[1]!);
    const allowed = cells[2]!;
    const mayImport = allowed === 'everything' ? undefined : [...allowed.matchAll(/`([a-z-]+(?:\/[a-z-]+)*(?:\/|\.ts))`/g)].map((m) => m[1]!);
    rows.push({ owns, mayImport });
  }
  return rows;
}

const covers = (entry: string, file: string): boolean => (entry.endsWith('/') ? file.startsWith(entry) : file === entry);

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.relative(SRC, path.join(entry.parentPath, entry.name)).split(path.sep).join('/'))
    .sort();
}

it("docs/architecture.md's layering table names paths that exist", async () => {
  const missing: string[] = [];
  for (const row of await layering()) {
    for (const entry of [...row.owns, ...(row.mayImport ?? [])]) {
      if (!existsSync(path.join(SRC, entry))) missing.push(entry);
    }
  }
  assert.deepEqual(missing, []);
});

it("every import in src/ is one docs/architecture.md's layering table allows", async () => {
  const rows = await layering();
  assert.ok(rows.length >= 10, `parsed ${rows.length} rows`);
  const rowOf = (file: string): Row | undefined =>
    rows
      .flatMap((row) => row.owns.filter((owned) => covers(owned, file)).map((owned) => ({ row, length: owned.length })))
      .sort((a, b) => b.length - a.length)[0]?.row;

  const unowned: string[] = [];
  const violations: string[] = [];
  for (const file of await sourceFiles(SRC)) {
    const row = rowOf(file);
    if (row === undefined) {
      unowned.push(file);
      continue;
    }
    const text = await readFile(path.join(SRC, file), 'utf8');
    // The compiler's own scan: static imports (type-only too), re-exports and import().
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = path.posix.join(path.posix.dirname(file), fileName).replace(/\.js$/, '.ts');
      if (rowOf(target) === row || row.mayImport === undefined) continue;
      if (!row.mayImport.some((entry) => covers(entry, target))) violations.push(`${file} imports ${target}`);
    }
  }
  assert.deepEqual(unowned, [], 'files under src/ that no row of the table holds');
  assert.deepEqual(violations, [], "imports the table's \"may import\" column does not allow");
});
