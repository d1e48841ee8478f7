import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { migrate } from '../../src/store/sqlite/migrations.js';
import { SQLITE_FILE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { sha256Hex } from '../../src/util/crypto.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * SQLite's migration 24: ids stored with U+0000 before ingest replaced it
 * with U+FFFD (7a2233a). Everything that matches an id now names it with
 * U+FFFD, so such rows were missed: a deletion of the user left the old
 * messages, the deliveries filters did not find them, a suppression stored
 * with U+0000 let the user's new messages through, a profile could not be
 * found. Only SQLite could store U+0000 (PostgreSQL text refuses it), so the
 * old rows are written straight into a file at schema 23, as that version
 * stored them, and the current version opens it.
 */

/** The schema version before the migration. */
const OLD_VERSION = 23;
const SOURCE = 'src_old';
const WRITE_KEY = 'key_old_0123456789';

/** message_keys' text of a message, as message-keys.ts indexes it. */
const KEYS_OF = `concat_ws(' ', CASE WHEN message_id <> '' THEN 'm' || hex(message_id) END, CASE WHEN user_id <> '' THEN 'u' || hex(user_id) END)`;

function oldFile(dir: string): BetterSqlite3.Database {
  const db = new BetterSqlite3(path.join(dir, SQLITE_FILE));
  migrate(db, OLD_VERSION);
  return db;
}

/** The old rows a server opens: messages, deliveries, a suppression, a running deletion, profiles. */
function writeOldRows(dir: string, now: number): void {
  const db = oldFile(dir);
  try {
    db.prepare(`INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES (?, 'old', ?, ?, 1, ?, ?)`).run(
      SOURCE,
      WRITE_KEY,
      sha256Hex(WRITE_KEY),
      now,
      now,
    );
    const insertMessage = db.prepare(`
      INSERT INTO messages (source_id, status, type, message_id, user_id, received_at, body) VALUES (?, 'accepted', 'track', ?, ?, ?, ?)`);
    const message = (messageId: string, userId: string): number =>
      Number(insertMessage.run(SOURCE, messageId, userId, now - 60_000, JSON.stringify({ type: 'track', event: 'E', userId, messageId })).lastInsertRowid);
    const seqs = [message('m\u0000indexed', 'u\u0000'), message('m\u0000unindexed', 'u\u0000'), message('keep', 'keeper'), message('r1', 'r\u0000')];
    for (const seq of seqs) {
      db.prepare(`INSERT INTO deliveries (source_id, message_seq, destination, status, created_at, updated_at) VALUES (?, ?, 'webhooks', 'succeeded', ?, ?)`).run(
        SOURCE,
        seq,
        now,
        now,
      );
    }
    // The first message indexed by a batch, the others not yet (both are searched).
    db.prepare(`INSERT INTO message_keys (rowid, keys) SELECT seq, ${KEYS_OF} FROM messages WHERE seq = ?`).run(seqs[0]);
    db.prepare(`UPDATE message_keys_state SET indexed_seq = ?`).run(seqs[0]);
    // Engage had evaluated them: it has nothing to add here.
    db.prepare(`UPDATE engage_state SET cursor_seq = ?`).run(seqs.at(-1));

    db.prepare(`
      INSERT INTO regulations (id, regulation_type, subject_ids, subject_count, source_ids, status, created_at, updated_at)
      VALUES (?, ?, ?, ?, NULL, ?, ?, ?)`).run('reg_sup', 'SUPPRESS_ONLY', JSON.stringify(['x\u0000']), 1, 'FINISHED', now, now);
    db.prepare(`INSERT INTO suppressions (user_id, source_id, regulation_id, created_at) VALUES (?, '*', 'reg_sup', ?)`).run('x\u0000', now);
    // A deletion still to run, listing the user twice as an old version took it.
    db.prepare(`
      INSERT INTO regulations (id, regulation_type, subject_ids, subject_count, source_ids, status, created_at, updated_at)
      VALUES (?, ?, ?, ?, NULL, ?, ?, ?)`).run('reg_del', 'DELETE_ONLY', JSON.stringify(['r\u0000', 'r\uFFFD']), 2, 'INITIALIZED', now, now);
    db.prepare(`INSERT INTO regulation_sources (regulation_id, source_id, status, updated_at) VALUES ('reg_del', ?, 'PENDING', ?)`).run(SOURCE, now);

    const state = JSON.stringify({ v: 1, traits: { plan: 'old' }, traitTimes: { plan: now }, acc: {} });
    for (const id of ['prof_p', 'prof_a', 'prof_b']) {
      db.prepare(`INSERT INTO profiles (id, version, next_expiry, updated_at, recent_seqs, computed_traits, state) VALUES (?, 1, NULL, ?, '[]', '{}', ?)`).run(id, now, state);
    }
    const identifier = db.prepare(`INSERT INTO profile_identifiers (identifier, profile_id) VALUES (?, ?)`);
    identifier.run('user_id:p\u0000', 'prof_p');
    identifier.run('anonymous_id:pa', 'prof_p');
    // The same user under both forms: the old one, and one Engage made since ingest stores U+FFFD.
    identifier.run('user_id:c\u0000', 'prof_a');
    identifier.run('anonymous_id:ca', 'prof_a');
    identifier.run('user_id:c\uFFFD', 'prof_b');
  } finally {
    db.close();
  }
}

void describe('ids stored with U+0000 through migration 24: sqlite', () => {
  let dir: string;
  let sy: TestSwitchyard;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nul-ids-migration-'));
    writeOldRows(dir, Date.now());
    sy = await startTestSwitchyard({ 'data-dir': dir });
  });
  after(async () => {
    await sy?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const messageIds = async (): Promise<string[]> => (await sy.store.listRecentMessages(SOURCE, 50)).map((m) => m.messageId ?? '').sort();

  void it('keeps suppressing a user suppressed with U+0000, and de-duplicates a resent old messageId', async () => {
    const suppressed = await sy.send('/v1/track', WRITE_KEY, { event: 'E', userId: 'x\u0000', messageId: 'from-suppressed' });
    assert.equal(suppressed.status, 200);
    const resent = await sy.send('/v1/track', WRITE_KEY, { event: 'E', userId: 'u\u0000', messageId: 'm\u0000indexed' });
    assert.equal(resent.status, 200);
    const recent = await sy.store.listRecentMessages(SOURCE, 2);
    assert.deepEqual(
      recent.map((m) => [m.messageId, m.status]).sort(),
      [
        ['from-suppressed', 'suppressed'],
        ['m\uFFFDindexed', 'duplicate'],
      ],
    );
  });

  void it('finds the old messages by the deliveries filters, indexed or not, and a deletion of the user erases them', async () => {
    const byUser = await sy.admin('GET', `/deliveries?userId=${encodeURIComponent('u\u0000')}`);
    assert.equal(byUser.status, 200, JSON.stringify(byUser.body));
    assert.deepEqual(byUser.body.deliveries.map((d: { messageId: string }) => d.messageId).sort(), ['m\uFFFDindexed', 'm\uFFFDunindexed']);
    for (const messageId of ['m\u0000indexed', 'm\u0000unindexed']) {
      const found = await sy.admin('GET', `/deliveries?messageId=${encodeURIComponent(messageId)}`);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      assert.deepEqual(found.body.deliveries.map((d: { messageId: string }) => d.messageId), [messageId.replace('\u0000', '\uFFFD')], messageId);
    }

    const deletion = await sy.admin('POST', '/regulations', { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: ['u\u0000'] });
    assert.equal(deletion.status, 201, JSON.stringify(deletion.body));
    await eventually(async () => ((await sy.admin('GET', `/regulations/${deletion.body.id}`)).body.status === 'FINISHED' ? true : undefined), 15_000, 'the deletion');
    const left = await messageIds();
    assert.ok(!left.some((id) => id.startsWith('m')), `the user's old messages are erased: ${JSON.stringify(left)}`);
    assert.ok(left.includes('keep'), "another user's message stays");
    const afterDeletion = await sy.admin('GET', `/deliveries?userId=${encodeURIComponent('u\u0000')}`);
    assert.deepEqual(afterDeletion.body.deliveries, []);
  });

  void it('runs a deletion stored with U+0000 in its subjects against the old messages', async () => {
    await eventually(async () => ((await sy.admin('GET', '/regulations/reg_del')).body.status === 'FINISHED' ? true : undefined), 15_000, 'the old deletion');
    assert.ok(!(await messageIds()).includes('r1'), 'the old deletion erased its user');
    const regulation = await sy.admin('GET', '/regulations/reg_del');
    assert.deepEqual(regulation.body.subjectIds, ['r\uFFFD'], 'its subjects as ingest stores ids, once each');
  });

  void it('finds a profile stored under an id with U+0000 by the id as sent, and where both forms were stored, the one Engage used since', async () => {
    const found = await sy.admin('GET', `/profiles/${encodeURIComponent('user_id:p\u0000')}`);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.equal(found.body.id, 'prof_p');
    assert.deepEqual(found.body.identifiers, ['anonymous_id:pa', 'user_id:p\uFFFD']);
    const both = await sy.admin('GET', `/profiles/${encodeURIComponent('user_id:c\u0000')}`);
    assert.equal(both.status, 200, JSON.stringify(both.body));
    assert.equal(both.body.id, 'prof_b');
    const other = await sy.admin('GET', `/profiles/${encodeURIComponent('anonymous_id:ca')}`);
    assert.equal(other.status, 200, JSON.stringify(other.body));
    assert.deepEqual([other.body.id, other.body.identifiers], ['prof_a', ['anonymous_id:ca']], 'the other profile keeps its other identifiers');
  });
});

void describe('ids stored with U+0000 through migration 24, where two become one: sqlite', () => {
  void it('keeps one ordering tail (the latest delivery), one suppression (the newest), and rewrites pending syncs and the key index', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nul-ids-collide-'));
    try {
      const db = oldFile(dir);
      db.exec(`INSERT INTO sources (id, name, write_key, write_key_hash, enabled, created_at, updated_at) VALUES ('s', 's', 'k', 'h', 1, 0, 0)`);
      const tail = db.prepare(`INSERT INTO delivery_tails (scope, order_key, delivery_id) VALUES (?, ?, ?)`);
      tail.run('webhooks:s', 'k\u0000', 9);
      tail.run('webhooks:s', 'k\uFFFD', 5);
      tail.run('webhooks:s', 'j\u0000', 3);
      tail.run('replay:r', 'k\u0000', 4);
      const suppression = db.prepare(`INSERT INTO suppressions (user_id, source_id, regulation_id, created_at) VALUES (?, ?, ?, ?)`);
      suppression.run('x\u0000\uFFFD', '*', 'reg_1', 1);
      suppression.run('x\uFFFD\u0000', '*', 'reg_2', 3);
      suppression.run('x\uFFFD\uFFFD', '*', 'reg_0', 2);
      suppression.run('x\u0000\u0000', 's', 'reg_1', 1);
      db.prepare(`
        INSERT INTO deliveries (source_id, message_seq, destination, status, next_attempt_at, created_at, updated_at, sync_computation_id, sync_key)
        VALUES ('s', 1, 'webhooks', 'pending', 0, 0, 0, 'comp_1', ?)`).run('s u:y\u0000');
      const seq = Number(
        db.prepare(`INSERT INTO messages (source_id, status, type, message_id, user_id, received_at, body) VALUES ('s', 'accepted', 'track', ?, ?, 0, '{}')`).run('n\u0000', 'v\u0000')
          .lastInsertRowid,
      );
      db.prepare(`INSERT INTO message_keys (rowid, keys) SELECT seq, ${KEYS_OF} FROM messages WHERE seq = ?`).run(seq);
      db.prepare(`UPDATE message_keys_state SET indexed_seq = ?`).run(seq);
      db.close();

      const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
      try {
        await store.migrate();
        assert.deepEqual(
          (await store.listSuppressions()).map((s) => [s.userId, s.sourceId, s.regulationId]).sort(),
          [
            ['x\uFFFD\uFFFD', undefined, 'reg_2'],
            ['x\uFFFD\uFFFD', 's', 'reg_1'],
          ],
        );
        // The later migration numbers the rows there were, for the nodes that read suppressions by seq.
        const changes = await store.listSuppressionChanges(0, 100);
        assert.deepEqual(changes.map((c) => [c.seq, c.lifted]), [[1, false], [2, false]]);
      } finally {
        await store.close();
      }

      const check = new BetterSqlite3(path.join(dir, SQLITE_FILE), { readonly: true });
      try {
        assert.deepEqual(check.prepare(`SELECT scope, order_key, delivery_id FROM delivery_tails ORDER BY scope, order_key`).all(), [
          { scope: 'replay:r', order_key: 'k\uFFFD', delivery_id: 4 },
          { scope: 'webhooks:s', order_key: 'j\uFFFD', delivery_id: 3 },
          { scope: 'webhooks:s', order_key: 'k\uFFFD', delivery_id: 9 },
        ]);
        assert.deepEqual(check.prepare(`SELECT sync_key FROM deliveries`).pluck().all(), ['s u:y\uFFFD']);
        const matches = (id: string): unknown[] =>
          check.prepare(`SELECT rowid FROM message_keys WHERE message_keys MATCH ?`).pluck().all(id);
        const hex = (id: string): string => Buffer.from(id, 'utf8').toString('hex');
        assert.deepEqual(matches(`u${hex('v\uFFFD')} m${hex('n\uFFFD')}`), [seq], 'indexed under the ids as stored');
        assert.deepEqual(matches(`u${hex('v\u0000')}`), [], 'no longer under the old form');
      } finally {
        check.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
