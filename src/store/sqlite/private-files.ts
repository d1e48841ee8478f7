import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';

/**
 * The data folder holds write keys, webhook secrets and the admin token's
 * hash: it is created readable by its owner only (0700), whatever the umask.
 * A folder that already exists keeps its mode (it may be one the operator made).
 */
export function makePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Creates `file` readable and writable by its owner only (0600) before SQLite
 * opens it; SQLite then gives its -wal, -shm and -journal files the same mode.
 * Files of earlier versions, created 0644, are narrowed to 0600.
 */
export function makePrivateFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const each of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    if (existsSync(each)) chmodSync(each, 0o600);
  }
}
