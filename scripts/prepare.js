// npm's `prepare`: builds dist/ (`npm run build`) on `npm ci` / `npm install`
// in the checkout and before `npm pack` / `npm publish`.
//
// `npx switchyard` in the checkout runs it too: npm installs the checkout
// into its npx cache as a link to run its bin, and runs a link's `prepare`,
// which cost a 12 s rebuild on the first `npx switchyard`. There, when dist/
// is built, the CLI runs it as it is, like `node bin/switchyard.js`
// (`npm run build` rebuilds after a change to the sources).
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const built = existsSync(new URL('../dist/src/cli/main.js', import.meta.url));
if (process.env.npm_command === 'exec' && built) process.exit(0);
execSync('npm run build --silent', { cwd: new URL('..', import.meta.url), stdio: 'inherit' });
