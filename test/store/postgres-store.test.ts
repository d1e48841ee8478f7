import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SCHEMA_VERSION } from '../../src/store/postgres/migrations.js';
import { SchemaTooNewError } from '../../src/store/schema-error.js';
import type { DeliveryOutcome, Store, StoreTopic } from '../../src/store/store.js';
import { describePostgres, freshDatabase, type FreshDatabase, listenerPids, query } from '../helpers/postgres.js';
import { addSource, storeEntry, T0 } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';
import { describeEngageContract } from './engage-contract.js';
import { describeObservedContract } from './observed-contract.js';
import { describeRegulationsContract } from './regulations-contract.js';
import { describeReplaysContract } from './replays-contract.js';
import { describeStoreContract } from './store-contract.js';
import { describeTrafficContract } from './traffic-contract.js';

const openStore = (url: string): PostgresStore => PostgresStore.open({ databaseUrl: url, durability: 'process' });

const openFresh = async (): Promise<{ store: Store; cleanup: () => Promise<void> }> => {
  const db = await freshDatabase();
  const store = openStore(db.url);
  await store.migrate();
  return {
    store,
    cleanup: async () => {
      await store.close();
      await db.drop();
    },
  };
};

await describePostgres('PostgreSQL store', () => {
  describeStoreContract('postgres', openFresh);
  describeRegulationsContract('postgres', openFresh);
  describeReplaysContract('postgres', openFresh);
  describeEngageContract('postgres', openFresh);
  describeTrafficContract('postgres', openFresh);
  describeObservedContract('postgres', openFresh);

  describe('PostgreSQL specifics', { timeout: 120_000 }, () => {
    let db: FreshDatabase;
    let a: PostgresStore;
    let b: PostgresStore;

    before(async () => {
      db = await freshDatabase();
      a = openStore(db.url);
      b = openStore(db.url);
      await Promise.all([a.migrate(), b.migrate()]);
    });
    after(async () => {
      await Promise.all([a?.close(), b?.close()]);
      await db?.drop();
    });

    it('says it can be shared by several nodes', () => {
      assert.deepEqual(a.capabilities, { name: 'postgres', multiNode: true, preparesIngest: false, releasesLeases: false });
    });

    it('applies each migration once when several nodes start at once', async () => {
      const fresh = await freshDatabase();
      const stores = Array.from({ length: 4 }, () => openStore(fresh.url));
      try {
        await Promise.all(stores.map((s) => s.migrate()));
        const versions = await query<{ version: number }>(fresh.url, 'SELECT version FROM schema_migrations ORDER BY version');
        assert.deepEqual(
          versions.map((v) => v.version),
          Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
        );
        await stores[0]!.insertSettingIfAbsent('k', 'v');
        assert.equal(await stores[3]!.getSetting('k'), 'v');
      } finally {
        await Promise.all(stores.map((s) => s.close()));
        await fresh.drop();
      }
    });

    it('refuses a schema newer than it knows', async () => {
      const fresh = await freshDatabase();
      const first = openStore(fresh.url);
      const second = openStore(fresh.url);
      try {
        await first.migrate();
        await query(fresh.url, 'INSERT INTO schema_migrations (version) VALUES ($1)', [SCHEMA_VERSION + 1]);
        await assert.rejects(second.migrate(), (error: unknown) => {
          assert.ok(error instanceof SchemaTooNewError, `got ${String(error)}`);
          assert.equal(error.found, SCHEMA_VERSION + 1);
          assert.match(error.message, /newer than this Switchyard knows.*upgrade Switchyard/);
          return true;
        });
      } finally {
        await Promise.all([first.close(), second.close()]);
        await fresh.drop();
      }
    });

    it('says which server it could not reach', async () => {
      const store = openStore('postgres://postgres@127.0.0.1:1/nowhere');
      try {
        await assert.rejects(store.migrate(), (error: unknown) => {
          assert.match(String(error), /could not connect to PostgreSQL at 127\.0\.0\.1:1\/nowhere/);
          assert.ok((error as Error).cause !== undefined, 'the driver error is chained');
          return true;
        });
      } finally {
        await store.close();
      }
    });

    it('never leases one delivery to two nodes claiming at once', async () => {
      await addSource(a, 'src_claims');
      const total = 600;
      const entries = Array.from({ length: total }, () => storeEntry('src_claims', { receivedAt: T0 }));
      await a.appendMessages(entries, 0);
      const claimed: number[] = [];
      // Three claim loops per node, each on its own pooled connection.
      const loop = async (store: Store, owner: string): Promise<void> => {
        for (;;) {
          const batch = (await store.claimDeliveries({ owner, limit: 7, leaseMs: 600_000, now: T0 * 2 })).filter((c) => c.sourceId === 'src_claims');
          if (batch.length === 0) return;
          claimed.push(...batch.map((c) => c.id));
        }
      };
      await Promise.all([loop(a, 'a1'), loop(a, 'a2'), loop(a, 'a3'), loop(b, 'b1'), loop(b, 'b2'), loop(b, 'b3')]);
      assert.equal(new Set(claimed).size, claimed.length, 'no delivery leased twice');
      assert.equal(claimed.length, total, 'every delivery leased once');
    });

    it("hands a crashed node's leases to another node once they expire, and ignores the first node's late outcomes", async () => {
      // A database of its own, so that no other test's deliveries are due.
      const fresh = await freshDatabase();
      const [one, two] = [openStore(fresh.url), openStore(fresh.url)];
      try {
        await Promise.all([one.migrate(), two.migrate()]);
        await addSource(one, 'src_lease');
        await one.appendMessages([storeEntry('src_lease', { receivedAt: T0 }), storeEntry('src_lease', { receivedAt: T0 })], 0);
        const first = await one.claimDeliveries({ owner: 'node-1', limit: 1000, leaseMs: 1000, now: T0 });
        assert.equal(first.length, 2);
        assert.equal((await two.claimDeliveries({ owner: 'node-2', limit: 1000, leaseMs: 1000, now: T0 + 999 })).length, 0, 'leased by node 1');
        const taken = await two.claimDeliveries({ owner: 'node-2', limit: 1000, leaseMs: 1000, now: T0 + 1000 });
        assert.deepEqual(
          taken.map((c) => c.id),
          first.map((c) => c.id),
          "node 2 takes them over once node 1's leases expire",
        );

        const at = T0 + 1200;
        const succeeded = (owner: string, id: number): DeliveryOutcome => ({
          kind: 'succeeded',
          id,
          owner,
          at,
          firstAttemptAt: at,
          attempts: [{ at, url: 'http://r', statusCode: 200, durationMs: 1 }],
        });
        await one.finishDeliveries(first.map((c) => succeeded('node-1', c.id)));
        for (const { id } of first) {
          const detail = await two.getDelivery(id);
          assert.equal(detail?.status, 'pending', 'node 1 lost the lease: its outcome changes nothing');
          assert.equal(detail?.attempts.length, 0);
        }
        await two.finishDeliveries([succeeded('node-2', taken[0]!.id)]);
        const done = await one.getDelivery(taken[0]!.id);
        assert.equal(done?.status, 'succeeded');
        assert.equal(done?.attempts.length, 1);
        assert.equal((await one.claimDeliveries({ owner: 'node-1', limit: 1000, leaseMs: 1000, now: T0 + 1999 })).length, 0, "node 2's lease holds");
        const again = await one.claimDeliveries({ owner: 'node-1', limit: 1000, leaseMs: 1000, now: T0 + 2000 });
        assert.deepEqual(
          again.map((c) => c.id),
          [taken[1]!.id],
          'only the unfinished one falls due again',
        );
      } finally {
        await Promise.all([one.close(), two.close()]);
        await fresh.drop();
      }
    });

    it('claims by walking the due index, not by reading every pending delivery, even without statistics', async () => {
      // A database of its own: fresh tables, never analyzed (as with autovacuum off, or a backlog built since the last analyze).
      const fresh = await freshDatabase();
      const store = openStore(fresh.url);
      try {
        await store.migrate();
        await addSource(store, 'src_plan');
        const total = 3000;
        for (let done = 0; done < total; done += 500) {
          await store.appendMessages(Array.from({ length: 500 }, () => storeEntry('src_plan', { receivedAt: T0 })), 0);
        }
        assert.equal((await store.claimDeliveries({ owner: 'w', limit: 10, leaseMs: 1000, now: T0 })).length, 10);
        // Index entries the claim read: a plan that reads every pending delivery and sorts them reads all 3000.
        const read = await eventually(async () => {
          const rows = await query<{ scans: number; read: number }>(
            fresh.url,
            `SELECT idx_scan AS scans, idx_tup_read AS read FROM pg_stat_user_indexes WHERE indexrelname = 'deliveries_due'`,
          );
          return rows[0] !== undefined && rows[0].scans > 0 ? rows[0].read : undefined;
        }, 30_000, 'the claim to show in pg_stat_user_indexes');
        assert.ok(read < total / 2, `the claim read ${read} index entries of ${total}`);
      } finally {
        await store.close();
        await fresh.drop();
      }
    });

    it('records outcomes by primary key, not by reading every pending delivery, even without statistics', async () => {
      // As the claim test above: fresh tables, never analyzed, a backlog of pending deliveries.
      const fresh = await freshDatabase();
      const store = openStore(fresh.url);
      try {
        await store.migrate();
        await addSource(store, 'src_outcome_plan');
        const total = 3000;
        for (let done = 0; done < total; done += 500) {
          await store.appendMessages(Array.from({ length: 500 }, () => storeEntry('src_outcome_plan', { receivedAt: T0 })), 0);
        }
        const claimed = await store.claimDeliveries({ owner: 'w', limit: 100, leaseMs: 60_000, now: T0 });
        assert.equal(claimed.length, 100);
        const at = T0 + 10;
        const finished = await store.finishDeliveries(
          claimed.map((c, i): DeliveryOutcome =>
            i % 2 === 0
              ? { kind: 'succeeded', id: c.id, owner: 'w', at, firstAttemptAt: at, attempts: [{ at, url: 'http://r', statusCode: 200, durationMs: 1 }] }
              : { kind: 'deferred', id: c.id, owner: 'w', at, nextAttemptAt: at + 1000 },
          ),
        );
        assert.equal(finished, 0, 'no ordered successors to release');
        assert.equal((await store.getDelivery(claimed[0]!.id))?.status, 'succeeded');
        assert.equal((await store.getDelivery(claimed[1]!.id))?.status, 'pending', 'deferred');
        // Once the claim's 100 and the outcomes' 100 updates show in the statistics, so do the index entries both read.
        const read = await eventually(async () => {
          const rows = await query<{ updated: number; read: number }>(
            fresh.url,
            `SELECT t.n_tup_upd AS updated, i.idx_tup_read AS read FROM pg_stat_user_tables t, pg_stat_user_indexes i
             WHERE t.relname = 'deliveries' AND i.indexrelname = 'deliveries_due'`,
          );
          return rows[0] !== undefined && Number(rows[0].updated) >= 200 ? Number(rows[0].read) : undefined;
        }, 30_000, 'the claim and the outcomes to show in the statistics');
        // The claim reads about 100; a plan that walks deliveries_due for the outcomes reads every pending one, twice.
        assert.ok(read < total / 2, `the claim and the outcomes read ${read} deliveries_due entries of ${total}`);
      } finally {
        await store.close();
        await fresh.drop();
      }
    });

    it('deletes the raw requests it processed by primary key, not by reading the whole backlog, even without statistics', async () => {
      const fresh = await freshDatabase();
      // One connection, so that every pass runs the statement prepared on it.
      const store = PostgresStore.open({ databaseUrl: fresh.url, durability: 'process', poolSize: 1 });
      try {
        await store.migrate();
        await addSource(store, 'src_raw_plan');
        const body = JSON.stringify({ userId: 'u', event: 'e' });
        const append = (from: number, count: number) =>
          store.appendRawRequests(
            Array.from({ length: count }, (_, n) => ({ sourceId: 'src_raw_plan', route: 'track', receivedAt: T0 + from + n, ip: undefined, configVersion: 1, messageCount: 1, body, headers: undefined })),
          );
        const processTen = async () => {
          const processed = await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, (rows) => rows.map((row) => [storeEntry('src_raw_plan', { receivedAt: row.receivedAt })]), 0);
          assert.equal(processed.requests, 10);
        };
        const readOnceDeleted = (deleted: number) =>
          eventually(async () => {
            const rows = await query<{ deleted: number; read: number }>(
              fresh.url,
              `SELECT n_tup_del AS deleted, coalesce(seq_tup_read, 0) AS read FROM pg_stat_user_tables WHERE relname = 'raw_requests'`,
            );
            return rows[0] !== undefined && Number(rows[0].deleted) >= deleted ? Number(rows[0].read) : undefined;
          }, 30_000, `${deleted} deletes to show in the statistics`);
        // Passes over a small table first: after five, the prepared statement keeps a generic plan, made for a table that small.
        await append(0, 80);
        for (let pass = 0; pass < 8; pass++) await processTen();
        const before = await readOnceDeleted(80);
        // Then a backlog builds up.
        const total = 3000;
        for (let done = 0; done < total; done += 500) await append(1000 + done, 500);
        await processTen();
        const read = (await readOnceDeleted(90)) - before;
        assert.ok(read < total / 2, `processing 10 raw requests read ${read} rows of ${total} sequentially`);
      } finally {
        await store.close();
        await fresh.drop();
      }
    });

    it('processes each raw request on one node only, with its duplicates, delivery jobs and counts lined up', async () => {
      await addSource(a, 'src_raw');
      const total = 300;
      // A minute no other test counts messages in.
      const DAY_LATER = T0 + 86_400_000;
      // Bodies come back byte for byte: quotes, backslashes, \u0000 escapes, non-ASCII.
      const odd = 'quote " backslash \\ nul \u0000 é 😀 [1,2] {"a":null}';
      // Request n holds two messages: its own id, and one that requests n and n + 1 share.
      const requests = Array.from({ length: total }, (_, n) => ({
        sourceId: 'src_raw', route: 'batch', receivedAt: DAY_LATER + n, ip: undefined, configVersion: 1, messageCount: 2,
        body: JSON.stringify({ ids: [`own-${n}`, `shared-${n - (n % 2)}`], odd }),
        headers: n % 3 === 0 ? JSON.stringify({ odd }) : undefined,
      }));
      await Promise.all([a.appendRawRequests(requests.slice(0, total / 2)), b.appendRawRequests(requests.slice(total / 2))]);
      const built: string[] = [];
      const results: Array<{ seq: number; status: string; messageId: string }> = [];
      const build = (rows: readonly { body: string; headers: string | undefined; receivedAt: number }[]) =>
        rows.map((row) => {
          built.push(row.body);
          const n = row.receivedAt - DAY_LATER;
          assert.equal(row.headers, requests[n]!.headers);
          const { ids } = JSON.parse(row.body) as { ids: string[] };
          return ids.map((messageId) => storeEntry('src_raw', { messageId, receivedAt: row.receivedAt, body: JSON.stringify({ messageId, odd }), destinations: ['webhooks'] }));
        });
      // Three processing loops per node, each on its own pooled connection.
      const loop = async (store: Store): Promise<void> => {
        for (;;) {
          const ids: string[] = [];
          const processed = await store.processRawRequests({ maxRequests: 7, maxMessages: 10 }, (rows) => {
            const entries = build(rows);
            ids.push(...entries.flat().map((e) => e.messageId!));
            return entries;
          }, 0);
          if (processed.requests === 0) return;
          processed.results.forEach((result, i) => results.push({ ...result, messageId: ids[i]! }));
        }
      };
      await Promise.all([loop(a), loop(a), loop(a), loop(b), loop(b), loop(b)]);

      assert.equal(built.length, total, 'every raw request processed once');
      assert.deepEqual(new Set(built), new Set(requests.map((r) => r.body)));
      assert.deepEqual(await a.rawBacklog(), { requests: 0, messages: 0, oldestReceivedAt: undefined });
      const accepted = results.filter((r) => r.status === 'accepted');
      assert.equal(results.length, total * 2);
      assert.equal(accepted.length, total + total / 2, 'each shared id accepted once, the other sighting a duplicate');
      assert.equal(new Set(accepted.map((r) => r.messageId)).size, accepted.length);

      const stored = new Map((await a.listRecentMessages('src_raw', 1_000)).map((m) => [m.seq, m]));
      for (const result of results) {
        assert.equal(stored.get(result.seq)?.body, JSON.stringify({ messageId: result.messageId, odd }), 'each result names its own message');
        assert.equal(stored.get(result.seq)?.status, result.status);
      }
      const jobs = await a.listDeliveries({ sourceId: 'src_raw', limit: 1_000 });
      assert.deepEqual(jobs.map((job) => job.messageSeq).sort((x, y) => x - y), accepted.map((r) => r.seq).sort((x, y) => x - y), 'one job per accepted message');
      const counted = (await a.trafficSince(DAY_LATER - 60_000)).filter((c) => c.metric === 'messages' && c.minute <= DAY_LATER + total);
      assert.equal(counted.filter((c) => c.status === 'accepted').reduce((sum, c) => sum + c.count, 0), accepted.length);
      assert.equal(counted.filter((c) => c.status === 'duplicate').reduce((sum, c) => sum + c.count, 0), total / 2);
    });

    it('lines up seqs with entries in a large append', async () => {
      await addSource(a, 'src_seqs');
      const entries = Array.from({ length: 1_000 }, (_, i) =>
        storeEntry('src_seqs', { body: JSON.stringify({ i }), status: i % 7 === 0 ? 'rejected' : 'accepted', destinations: i % 3 === 0 ? [] : ['webhooks'] }),
      );
      const results = await a.appendMessages(entries, 0);
      for (let i = 1; i < results.length; i++) assert.ok(results[i]!.seq > results[i - 1]!.seq);
      const stored = new Map((await a.listRecentMessages('src_seqs', 2_000)).map((m) => [m.seq, m]));
      results.forEach((result, i) => {
        assert.equal(stored.get(result.seq)?.body, entries[i]!.body);
        assert.equal(stored.get(result.seq)?.status, entries[i]!.status);
      });
      const jobs = await a.listDeliveries({ sourceId: 'src_seqs', limit: 2_000 });
      const bodies = new Map(results.map((r, i) => [r.seq, entries[i]!]));
      assert.equal(jobs.length, entries.filter((e) => e.status === 'accepted' && e.destinations.length > 0).length);
      for (const job of jobs) assert.equal(bodies.get(job.messageSeq)?.messageId, job.messageId);
    });

    it('de-duplicates a messageId twice in one call: accepted, then duplicate', async () => {
      await addSource(a, 'src_twice');
      const first = storeEntry('src_twice', { messageId: 'twice' });
      const results = await a.appendMessages([first, { ...first, receivedAt: T0 + 1 }, storeEntry('src_twice'), { ...first, receivedAt: T0 + 2 }], T0 - 1000);
      assert.deepEqual(results.map((r) => r.status), ['accepted', 'duplicate', 'accepted', 'duplicate']);
      assert.equal((await a.listDeliveries({ sourceId: 'src_twice', limit: 10 })).length, 2);
    });

    it('keeps bodies byte for byte, \\u0000 escapes, key order and spacing included', async () => {
      await addSource(a, 'src_bytes');
      const bodies = [
        '{"type":"track","event":"E","nul":"\\u0000","z":1,"a":2}',
        '{ "b" : 1 , "a" : [ ] ,"a":2, "s":"\\ud800 \\u00e9 é 😀" }',
      ];
      const results = await a.appendMessages(
        bodies.map((body) => storeEntry('src_bytes', { body })),
        0,
      );
      const stored = await a.listRecentMessages('src_bytes', 10);
      assert.deepEqual(stored.map((m) => m.body).reverse(), bodies);
      const claimed = (await a.claimDeliveries({ owner: 'bytes', limit: 1000, leaseMs: 1000, now: T0 * 3 })).filter((c) => c.sourceId === 'src_bytes');
      assert.deepEqual(claimed.map((c) => c.body), bodies);
      assert.deepEqual(claimed.map((c) => c.messageSeq), results.map((r) => r.seq));
    });

    it('stores fields holding U+0000, which PostgreSQL text cannot, and still de-duplicates them', async () => {
      await addSource(a, 'src_nul');
      const odd = storeEntry('src_nul', { messageId: 'id\u0000x', userId: 'user\u0000', type: 'tr\u0000ck', reason: undefined });
      const [first] = await a.appendMessages([odd], 0);
      assert.equal(first?.status, 'accepted');
      const [again] = await a.appendMessages([{ ...odd, receivedAt: T0 + 5 }], 0);
      assert.equal(again?.status, 'duplicate');
      const [stored] = await a.listRecentMessages('src_nul', 1);
      assert.equal(stored?.userId, 'user\uFFFD');
      assert.equal(stored?.body, odd.body);
    });

    it("passes one node's changes on to another node's subscribers, once each", async () => {
      const topics: StoreTopic[] = [];
      const unsubscribe = b.subscribe((topic) => topics.push(topic));
      try {
        await eventually(async () => ((await listenerPids(db.url)).length > 0 ? true : undefined), 10_000, "b's LISTEN connection");
        await addSource(b, 'src_own'); // b's own change: told directly, not again through NOTIFY
        assert.deepEqual(topics, ['config']);
        await addSource(a, 'src_notify');
        await a.appendMessages([storeEntry('src_notify')], 0);
        // Notifications arrive in commit order, so once a's last one is in, all are.
        await eventually(() => (topics.includes('deliveries') ? true : undefined), 5_000, "a's notification at b");
        assert.deepEqual(topics.filter((t) => t === 'config'), ['config', 'config'], `got ${topics.join(', ')}`);
        assert.ok(topics.includes('messages'));
      } finally {
        unsubscribe();
      }
    });

    it('settles, for callers asking at once, every seq committed before each of them asked', async () => {
      // Reads are shared by callers at once (every debugger stream asks on
      // every commit); one that joined a read already under way could get a
      // highest seq read before its own commit.
      await addSource(a, 'src_settled');
      for (let round = 0; round < 5; round++) {
        const reads: Array<Promise<void>> = [];
        for (let i = 0; i < 4; i++) {
          const [stored] = await a.appendMessages([storeEntry('src_settled')], 0);
          const committed = stored!.seq;
          reads.push(
            a.settledMessageSeq().then((settled) => {
              assert.ok(settled.seq >= committed, `settled ${settled.seq} below ${committed}, committed before asking`);
            }),
          );
        }
        await Promise.all(reads);
      }
    });

    it('settles a seq once the writers it waited for have ended, though other writers overlap every read', async () => {
      // Writers that each outlast a read's wait but overlap one another (nodes
      // queued on processing's advisory lock) used to keep every read from
      // settling anything: each waited for whoever ran at its own start.
      await addSource(a, 'src_overlap');
      const clients: pg.Client[] = [];
      const hold = async (): Promise<{ client: pg.Client; seq: number }> => {
        const client = new pg.Client({ connectionString: db.url });
        clients.push(client);
        await client.connect();
        await client.query('BEGIN; SELECT txid_current()');
        const { rows } = await client.query<{ seq: string }>(
          `INSERT INTO messages (source_id, status, type, received_at, body) VALUES ('src_overlap', 'accepted', 'track', $1, '{}') RETURNING seq`,
          [T0],
        );
        return { client, seq: Number(rows[0]!.seq) };
      };
      try {
        let writer = await hold();
        for (let round = 0; round < 3; round++) {
          const before = await a.settledMessageSeq();
          assert.ok(before.seq < writer.seq && before.settling, `settled ${before.seq} while ${writer.seq} is held`);
          const next = await hold(); // starts before the previous one ends
          await writer.client.query('COMMIT');
          const after = await a.settledMessageSeq();
          assert.ok(after.seq >= writer.seq, `settled ${after.seq}, not yet ${writer.seq}, whose writer ended (round ${round})`);
          assert.ok(after.seq < next.seq && after.settling, 'not past the seq still held');
          writer = next;
        }
        await writer.client.query('COMMIT');
      } finally {
        for (const client of clients) await client.end().catch(() => {});
      }
    });

    it('reconnects a dropped LISTEN connection', async () => {
      const topics: StoreTopic[] = [];
      const unsubscribe = b.subscribe((topic) => topics.push(topic));
      try {
        const [pid] = await eventually(async () => {
          const pids = await listenerPids(db.url);
          return pids.length === 1 ? pids : undefined;
        }, 10_000, 'one LISTEN connection');
        await query(db.url, 'SELECT pg_terminate_backend($1)', [pid]);
        await eventually(async () => {
          const pids = await listenerPids(db.url);
          return pids.length === 1 && pids[0] !== pid ? true : undefined;
        }, 10_000, 'a new LISTEN connection');
        // What was missed while it was down is reported as "check everything".
        await eventually(() => (['deliveries', 'config', 'messages'].every((t) => topics.includes(t as StoreTopic)) ? true : undefined), 5_000, 'catch-up topics');
        topics.length = 0;
        await addSource(a, 'src_after_reconnect');
        await eventually(() => (topics.includes('config') ? true : undefined), 5_000, 'a notification after reconnecting');
      } finally {
        unsubscribe();
      }
    });

    it('ends its pool and LISTEN connection on close', async () => {
      const store = openStore(db.url);
      await store.migrate();
      store.subscribe(() => {});
      await eventually(async () => ((await listenerPids(db.url)).length === 2 ? true : undefined), 10_000, 'a second LISTEN connection');
      const before = await query<{ n: number }>(db.url, `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'switchyard'`);
      await store.close();
      await store.close(); // idempotent
      await eventually(async () => {
        const [now] = await query<{ n: number }>(
          db.url,
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'switchyard'`,
        );
        return now!.n < before[0]!.n && (await listenerPids(db.url)).length === 1 ? true : undefined;
      }, 10_000, 'the closed store to disconnect');
    });
  });
});
