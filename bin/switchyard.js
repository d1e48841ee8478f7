#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm ci` through the prepare script).
import('../dist/src/cli/main.js').catch((error) => {
  if (error && error.code === 'ERR_MODULE_NOT_FOUND') {
    console.error('switchyard: dist/ is missing; run `npm ci` (or `npm run build`) first.');
  } else {
    console.error(error);
  }
  process.exitCode = 1;
});
