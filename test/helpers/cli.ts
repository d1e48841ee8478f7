import { execFile } from 'node:child_process';
import path from 'node:path';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed as JSON, when it is JSON. */
  readonly json: any;
}

/** Runs the CLI as a separate process, as a script would, with only PATH and `env` in its environment. */
export function runCli(args: readonly string[], env: Record<string, string> = {}, input?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--no-node-snapshot', BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
    child.stdin?.end(input);
  });
}
