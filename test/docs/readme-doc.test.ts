import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { it } from 'node:test';
import { SETTINGS } from '../../src/config.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const ADMIN = '/admin/v1';
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** The README's section under a `## ` heading. */
async function section(heading: string): Promise<string> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const part = readme.split(/^## /m).find((text) => text.startsWith(`${heading}\n`));
  assert.ok(part, `README.md has a "## ${heading}" section`);
  return part;
}

/** Each table of a section: its header cells and its rows' cells. */
function tables(text: string): { header: string[]; rows: string[][] }[] {
  const found: { header: string[]; rows: string[][] }[] = [];
  const cells = (line: string): string[] => line.replace(/^\|\s*|\s*\|$/g, '').split(/\s+\|\s+/);
  let current: { header: string[]; rows: string[][] } | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith('|')) {
      current = undefined;
    } else if (current === undefined) {
      current = { header: cells(line), rows: [] };
      found.push(current);
    } else if (!/^\|[-| ]+\|$/.test(line)) {
      current.rows.push(cells(line));
    }
  }
  return found;
}

const backticked = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/**
 * Every `METHOD path` the route tables of "Admin API and CLI" document: each
 * row's methods with each of its paths (`:name` parameters, queries dropped);
 * the first table's paths are under /admin/v1.
 */
async function documentedRoutes(): Promise<string[]> {
  const routes = new Set<string>();
  for (const table of tables(await section('Admin API and CLI'))) {
    if (!table.header[0]!.startsWith('route')) continue;
    const prefix = table.header[0]!.includes(ADMIN) ? ADMIN : '';
    for (const row of table.rows) {
      const words = backticked(row[0]!).flatMap((span) => span.split(/[\s,]+/));
      const methods = words.filter((word) => METHODS.has(word));
      const paths = words.filter((word) => word.startsWith('/')).map((word) => prefix + word.replace(/\?.*$/, ''));
      assert.ok(methods.length > 0 && paths.length > 0, `a method and a path in: ${row[0]}`);
      for (const method of methods) for (const route of paths) routes.add(`${method} ${route}`);
    }
  }
  return [...routes].sort();
}

it('the README lists every route the server registers, and no other', async () => {
  // docs/openapi.json is the served document of every registered route
  // (test/http/openapi.test.ts checks that it is up to date).
  const openApi = JSON.parse(await readFile(path.join(ROOT, 'docs', 'openapi.json'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
  const registered = Object.entries(openApi.paths)
    .flatMap(([route, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${route.replace(/\{([^}]+)\}/g, ':$1')}`))
    .sort();
  assert.ok(registered.some((route) => route.startsWith(`GET ${ADMIN}/sources`)), 'read the admin routes');
  assert.deepEqual(await documentedRoutes(), registered);
});

it("the README's Configuration table lists every setting, with its variable and flag", async () => {
  const documented: string[] = [];
  const [table] = tables(await section('Configuration'));
  assert.ok(table, 'a table under "## Configuration"');
  for (const row of table.rows) {
    const variables = backticked(row[0]!);
    const flags = backticked(row[1]!);
    assert.equal(variables.length, flags.length, `as many variables as flags in: ${row.join(' | ')}`);
    variables.forEach((variable, i) => documented.push(`${variable} ${flags[i]}`));
  }
  const settings = Object.values(SETTINGS).map((setting) => `${setting.env} --${setting.flag}`);
  assert.deepEqual(documented.sort(), settings.sort());
});
