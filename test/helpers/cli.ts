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

/** The path of `bin/switchyard.js`, for tests that spawn it themselves. */
export const CLI_BIN = BIN;

/**
 * Runs the CLI as a separate process, as a script would, with only PATH and
 * `env` in its environment, in `options.cwd` (default: this process's).
 */
export function runCli(args: readonly string[], env: Record<string, string> = {}, input?: string, options: { cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--no-node-snapshot', BIN, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, cwd: options.cwd, timeout: 20_000 }, (error, stdout, stderr) => {
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
