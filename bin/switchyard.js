#!/usr/bin/env node
// Transformations run in isolated-vm, which on Node 20 and later needs V8's
// startup snapshot off (`--no-node-snapshot`, a process-wide flag that worker
// threads inherit). Without it this re-runs itself with it; the child dies
// with the parent (an IPC channel that closes when the parent is killed, even
// with SIGKILL), so `kill -9` of the pid a supervisor knows stops the server.
import { spawn } from 'node:child_process';

const FLAG = '--no-node-snapshot';
const hasFlag = process.execArgv.includes(FLAG) || (process.env.NODE_OPTIONS ?? '').split(/\s+/).includes(FLAG);

if (!hasFlag) {
  const child = spawn(process.execPath, [FLAG, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, SWITCHYARD_REEXEC: '1' },
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (signal !== null) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
} else {
  if (process.env.SWITCHYARD_REEXEC === '1' && typeof process.send === 'function') {
    process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
    process.channel?.unref();
  }
  // The compiled CLI lives in dist/ (built by `npm ci` through the prepare script).
  import('../dist/src/cli/main.js').catch((error) => {
    if (error && error.code === 'ERR_MODULE_NOT_FOUND') {
      console.error('switchyard: dist/ is missing; run `npm ci` (or `npm run build`) first.');
    } else {
      console.error(error);
    }
    process.exitCode = 1;
  });
}
