#!/usr/bin/env node
// Builds the web console (console/src, Preact) into dist/console with esbuild:
// one minified script and one stylesheet, no CDN, served by `serve` at /console.
// Prints the compressed size of the script, whose first load must stay under 150 KB.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { brotliCompressSync, gzipSync } from 'node:zlib';

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, 'dist', 'console');
mkdirSync(out, { recursive: true });

await build({
  entryPoints: [path.join(root, 'console', 'src', 'main.tsx')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outfile: path.join(out, 'app.js'),
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(path.join(root, 'console', 'index.html'), path.join(out, 'index.html'));
copyFileSync(path.join(root, 'console', 'app.css'), path.join(out, 'app.css'));
copyFileSync(path.join(root, 'console', 'favicon.svg'), path.join(out, 'favicon.svg'));

if (process.argv.includes('--size')) {
  const script = readFileSync(path.join(out, 'app.js'));
  const kb = (bytes) => `${(bytes / 1024).toFixed(1)} KB`;
  process.stdout.write(`console script: ${kb(script.length)} raw, ${kb(gzipSync(script, { level: 9 }).length)} gzip, ${kb(brotliCompressSync(script).length)} brotli\n`);
}
