import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { VERSION } from '../../src/version.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env['PATH'] ?? '' }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

describe('CLI help', () => {
  it('lists every serve setting with its flag and environment variable', async () => {
    const help = await cli(['serve', '--help']);
    assert.equal(help.code, 0, help.stderr);
    for (const [flag, env] of [['--port', 'PORT'], ['--data-dir', 'SWITCHYARD_DATA_DIR'], ['--workers', 'SWITCHYARD_WORKERS'], ['--public-url', 'SWITCHYARD_PUBLIC_URL'], ['--log-level', 'LOG_LEVEL']]) {
      assert.match(help.stdout, new RegExp(`${flag}\\s+${env}\\s+\\S`), `${flag} is listed`);
    }
  });

  it('knows -h, -v and --version', async () => {
    assert.match((await cli(['-h'])).stdout, /^Usage: switchyard <command>/);
    assert.equal((await cli(['-v'])).stdout.trim(), VERSION);
    assert.equal((await cli(['--version'])).stdout.trim(), VERSION);
  });

  it('prints one command group\'s usage for <command> --help, and everything for --help alone', async () => {
    for (const [group, others] of [['webhooks', ['  deliveries ', '  sources ', '  tracking-plans ']], ['tracking-plans', ['  webhooks ', '  transformations ']], ['sources', ['  webhooks ']], ['audiences', ['  profiles ']]] as const) {
      const help = await cli([group, '--help']);
      assert.equal(help.code, 0, help.stderr);
      assert.match(help.stdout, new RegExp(`^Usage: switchyard ${group} `), group);
      assert.match(help.stdout, new RegExp(`^  ${group} \\S`, 'm'), `${group}: its commands`);
      for (const other of others) assert.equal(help.stdout.includes(`\n${other}`), false, `${group} --help lists no "${other.trim()}" command`);
      assert.match(help.stdout, /SWITCHYARD_URL/, `${group}: how to reach a server`);
      assert.deepEqual(await cli(['help', group]), help, `help ${group} is the same`);
    }
    assert.match((await cli(['deliveries', 'list', '-h'])).stdout, /^Usage: switchyard deliveries /);
    const unknown = await cli(['trackingplans', '--help']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command "trackingplans" \(did you mean "tracking-plans"\?\)/);
    const all = await cli(['--help']);
    for (const group of ['webhooks', 'deliveries', 'tracking-plans', 'transformations', 'functions', 'sources']) assert.match(all.stdout, new RegExp(`^  ${group} `, 'm'), group);
  });

  it('suggests what a mistyped command or flag meant', async () => {
    const command = await cli(['sevre']);
    assert.equal(command.code, 2);
    assert.match(command.stderr, /unknown command "sevre" \(did you mean "serve"\?\)/);
    const flag = await cli(['serve', '--prot', '0']);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /unknown flag --prot \(did you mean --port\?\)/);
  });

  it('refuses to create an empty store from an admin command, naming the folder', async () => {
    const parent = mkdtempSync(path.join(tmpdir(), 'switchyard-nostore-'));
    try {
      const missing = path.join(parent, 'data');
      const listed = await cli(['sources', 'list', '--data-dir', missing]);
      assert.equal(listed.code, 2);
      assert.match(listed.stderr, new RegExp(`no Switchyard store in ${missing.replaceAll('/', '\\/')} \\(SWITCHYARD_DATA_DIR / --data-dir\\)`));
      assert.equal(existsSync(missing), false, 'nothing was created');
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
