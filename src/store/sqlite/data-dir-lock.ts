import { closeSync, openSync, readSync, rmSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { makePrivateDir, makePrivateFile } from './private-files.js';

/** The file in the data folder that `serve` holds locked while it runs. */
export const LOCK_FILE = 'serve.lock';

/**
 * A second `serve` on a data folder another `serve` holds. Two servers on one
 * SQLite store would release each other's delivery leases, de-duplicate each
 * on its own and apply each its own settings, so the second refuses to start.
 */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';

  constructor(
    readonly dataDir: string,
    /** The holder's process id, when the lock file names one. */
    readonly pid: number | undefined,
  ) {
    super(
      `the data folder ${dataDir} is in use by another switchyard serve` +
        `${pid === undefined ? '' : ` (PID ${pid})`}; stop it, or give this one another --data-dir / SWITCHYARD_DATA_DIR`,
    );
  }
}

export interface DataDirLock {
  /** Lets another `serve` take the folder. The lock also ends when the process does, however it ends. */
  release(): void;
}

// The holder's PID lives in the SQLite header's user_version field (bytes 60-63,
// big-endian): a process that cannot get the lock can still read those bytes,
// because SQLite's locks are advisory byte-range locks that do not block read().
const USER_VERSION_OFFSET = 60;

/**
 * Takes the data folder for this process: `serve.lock` is a tiny SQLite
 * database held in EXCLUSIVE locking mode. The operating system drops the
 * lock when the process exits, even on SIGKILL, so no stale lock survives a
 * crash. The CLI does not take it, so it keeps working beside a server.
 * Throws {@link DataDirInUseError} when another process holds it.
 */
export function lockDataDir(dataDir: string, pid: number = process.pid): DataDirLock {
  makePrivateDir(dataDir);
  const file = path.join(dataDir, LOCK_FILE);
  try {
    return holdLockFile(file, dataDir, pid);
  } catch (error) {
    // The journal lives in memory (no lingering serve.lock-journal), so a crash
    // in the middle of the one-page write could leave a damaged file. It holds
    // nothing but the PID: start it afresh.
    const code = (error as { code?: string }).code;
    if (code !== 'SQLITE_NOTADB' && code !== 'SQLITE_CORRUPT') throw error;
    rmSync(file, { force: true });
    return holdLockFile(file, dataDir, pid);
  }
}

function holdLockFile(file: string, dataDir: string, pid: number): DataDirLock {
  makePrivateFile(file);
  const db: Database = new BetterSqlite3(file);
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = MEMORY');
    // The first write takes the exclusive lock; EXCLUSIVE locking mode keeps it until close.
    db.pragma(`user_version = ${pid}`);
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code === 'SQLITE_BUSY') throw new DataDirInUseError(dataDir, readHolderPid(file));
    throw error;
  }
  return {
    release() {
      if (db.open) db.close();
    },
  };
}

function readHolderPid(file: string): number | undefined {
  try {
    const fd = openSync(file, 'r');
    try {
      const bytes = Buffer.alloc(4);
      if (readSync(fd, bytes, 0, 4, USER_VERSION_OFFSET) !== 4) return undefined;
      const pid = bytes.readUInt32BE(0);
      return pid > 0 ? pid : undefined;
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
}
