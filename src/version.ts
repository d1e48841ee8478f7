import { readFileSync } from 'node:fs';

/** The package version, read once from package.json (two levels above dist/src). */
export const VERSION: string = (() => {
  const url = new URL('../../package.json', import.meta.url);
  const parsed = JSON.parse(readFileSync(url, 'utf8')) as { version?: unknown };
  return typeof parsed.version === 'string' ? parsed.version : '0.0.0';
})();
