/**
 * The data dir on a small tmpfs that fills up while ingesting: what the
 * server cannot store must be answered 503 storage_unavailable with
 * Retry-After (never a 200, never a crash), every 200 must be readable once
 * space is freed, and ingest must recover to 200 by itself. Needs root to
 * mount a tmpfs; without it the scenario is SKIPPED, not faked.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { freePort } from '../bench/lib/free-port.js';
import { check, round, type Scenario, sleep, verdictOf, waitUntil } from './lib/harness.js';
import { PacedSender } from './lib/paced-sender.js';
import { createSource, startServer } from './lib/switchyard.js';

const FS_SIZE_MB = 8;
/** Space left free by the filler file before the load starts. */
const HEADROOM_BYTES = 1.5 * 2 ** 20;
const RATE_PER_SEC = 200;
const PAD_BYTES = 1000;
/** The phase "full" ends after this many 503s (or its time limit). */
const WANTED_REFUSALS = 100;

function freeBytes(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}

function fill(file: string, bytes: number): void {
  const fd = openSync(file, 'w');
  try {
    const block = Buffer.alloc(64 * 1024, 1);
    for (let written = 0; written < bytes; ) {
      written += writeSync(fd, block, 0, Math.min(block.length, bytes - written));
    }
  } finally {
    closeSync(fd);
  }
}

/** Lazily (`-l`), should a killed child still hold a file there. */
function unmount(dir: string): void {
  try {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
  } catch {
    // not mounted (any more)
  }
}

export const diskFull: Scenario = {
  name: 'disk-full',
  summary: `data dir on a ${FS_SIZE_MB} MB tmpfs filled while ingesting ${RATE_PER_SEC} msg/s; then space is freed`,
  timeoutSec: (quick) => (quick ? 75 : 150),
  async run({ quick, log, defer }) {
    // Not makeTempDir: its exit handler would try to remove the mount point while mounted; ours unmounts first.
    const mountDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-chaos-disk-'));
    const removeMountDir = (): void => {
      unmount(mountDir);
      rmSync(mountDir, { recursive: true, force: true });
    };
    process.once('exit', removeMountDir);
    defer(() => {
      removeMountDir();
      process.removeListener('exit', removeMountDir);
    });
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${FS_SIZE_MB}m`, 'tmpfs', mountDir], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (error) {
      const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
      return { verdict: 'SKIPPED', reason: `cannot mount a tmpfs here (${stderr || (error instanceof Error ? error.message : String(error))})`, checks: [], figures: {} };
    }
    const dataDir = path.join(mountDir, 'data');
    mkdirSync(dataDir);
    const filler = path.join(mountDir, 'filler');

    const server = await startServer({ label: 'switchyard', dataDir, port: await freePort() });
    defer(() => server.kill('SIGKILL'));
    const source = await createSource(server.url, 'chaos-disk');
    const fillBytes = Math.max(0, freeBytes(mountDir) - HEADROOM_BYTES);
    fill(filler, fillBytes);
    log(`tmpfs ${FS_SIZE_MB} MB on ${mountDir}; filler of ${round(fillBytes / 2 ** 20, 1)} MB leaves ${round(freeBytes(mountDir) / 2 ** 20, 2)} MB`);

    const sender = new PacedSender({ baseUrl: server.url, authorization: source.authorization, ratePerSec: RATE_PER_SEC, idPrefix: 'disk', padBytes: PAD_BYTES, timeoutMs: 5000 });
    sender.start();
    defer(() => sender.stop());
    const refusals = (): number => sender.count('503');
    const holdMs = (quick ? 3 : 10) * 1000;
    let firstRefusalAt: number | undefined;
    // Full for a while, not just for an instant: at least WANTED_REFUSALS 503s over holdMs.
    const sawFull = await waitUntil(() => {
      if (refusals() > 0) firstRefusalAt ??= Date.now();
      if (server.exitedWith() !== undefined) return true;
      return firstRefusalAt !== undefined && refusals() >= WANTED_REFUSALS && Date.now() - firstRefusalAt >= holdMs;
    }, (quick ? 20 : 40) * 1000, 100);
    const statusesWhileFull = { ...sender.statuses };
    log(`full: ${JSON.stringify(statusesWhileFull)}; error codes ${JSON.stringify(sender.errorCodes)}; ${round(freeBytes(mountDir) / 1024)} KB free`);

    rmSync(filler, { force: true });
    const freedAt = Date.now();
    log(`filler removed: ${round(freeBytes(mountDir) / 2 ** 20, 2)} MB free`);
    const recovered = await waitUntil(() => {
      const after = sender.latencies.filter((l) => l.sentAtMs > freedAt);
      return after.length >= 50 && after.slice(-50).every((l) => l.status === 200);
    }, 15_000, 100);
    const recoverySec = round((Date.now() - freedAt) / 1000, 1);
    await sleep(1000);
    await sender.stop();
    const died = server.exitedWith();
    await server.kill('SIGTERM');

    const store = SqliteStore.open({ dataDir, durability: 'process' });
    let stored: Set<string>;
    try {
      await store.migrate();
      stored = new Set((await store.listRecentMessages(source.id, 1_000_000)).flatMap((m) => (m.messageId === undefined ? [] : [m.messageId])));
    } finally {
      await store.close();
    }
    const acknowledged = [...sender.acknowledged];
    const lost = acknowledged.filter((id) => !stored.has(id));
    const unexpected = Object.entries(sender.statuses).filter(([status]) => status !== '200' && status !== '503');
    const codes = Object.keys(sender.errorCodes);
    const figures = {
      sent: sender.sent,
      statuses: sender.statuses,
      errorCodes: sender.errorCodes,
      non200WithoutRetryAfter: sender.non200WithoutRetryAfter,
      acknowledged: acknowledged.length,
      storedAfterwards: stored.size,
      lost: lost.length,
      lostSample: lost.slice(0, 5),
      recoverySec,
      firstError: sender.firstError,
    };
    return verdictOf(
      [
        check('server survived', died === undefined, died ?? 'kept running'),
        check('disk filled up', sawFull && refusals() >= WANTED_REFUSALS, `${refusals()} requests answered 503 (want ${WANTED_REFUSALS}, for ${holdMs / 1000} s)`),
        check('refusals are 503 storage_unavailable with Retry-After', unexpected.length === 0 && codes.every((c) => c === 'storage_unavailable') && sender.non200WithoutRetryAfter === 0,
          `other statuses ${JSON.stringify(unexpected)}, codes ${JSON.stringify(codes)}, ${sender.non200WithoutRetryAfter} without Retry-After`),
        check('every 200 readable after freeing space', lost.length === 0, `${lost.length} of ${acknowledged.length} acknowledged messages not in the store`),
        check('ingest recovers to 200', recovered, recovered ? `50 consecutive 200s within ${recoverySec} s of freeing space` : `not within ${recoverySec} s`),
      ],
      figures,
    );
  },
};
