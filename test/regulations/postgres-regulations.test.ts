import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { pino } from 'pino';
import { loadConfig } from '../../src/config.js';
import { startSwitchyard } from '../../src/serve.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SCHEMA_VERSION } from '../../src/store/postgres/migrations.js';
import { describePostgres, freshDatabase, type FreshDatabase, listenerPids, query } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { SseReader, StreamEnded } from '../helpers/sse.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, sendWhenKnown, startTestSwitchyard } from '../helpers/switchyard.js';
import { sourceWithWebhooks } from '../helpers/webhooks.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');
const CLI_ENV = { PATH: process.env['PATH'] ?? '' };

/**
 * Regulations, the live debugger and the CLI end to end on PostgreSQL: two
 * Switchyards in this process share one fresh database, as two nodes behind
 * a load balancer would.
 */
await describePostgres('regulations, the debugger and the CLI on PostgreSQL, two nodes', () => {
  let db: FreshDatabase;
  let receiver: TestReceiver;
  let nodeA: TestSwitchyard;
  let nodeB: TestSwitchyard;
  const startNode = (): Promise<TestSwitchyard> => startTestSwitchyard({ 'database-url': db.url, 'allow-private-receivers': 'true' });

  before(async () => {
    db = await freshDatabase();
    receiver = await startReceiver();
    nodeA = await startNode();
    nodeB = await startNode();
  });
  after(async () => {
    await nodeA?.close();
    await nodeB?.close();
    await receiver?.close();
    await db?.drop();
  });

  it('SUPPRESS_WITH_DELETE erases the user everywhere, queues a delete per source with Webhooks, then suppresses', { timeout: 60_000 }, async () => {
    const hooked = await sourceWithWebhooks(nodeA, [receiver.url]);
    const plain = await nodeA.createSource('plain');
    for (const [node, source, userId] of [
      [nodeA, hooked, 'alice'],
      [nodeB, hooked, 'alice'],
      [nodeA, hooked, 'bob'],
      [nodeB, plain, 'alice'],
    ] as const) {
      assert.equal((await node.send('/v1/track', source.writeKey, { userId, event: 'Viewed' })).status, 200);
    }

    const created = await nodeB.admin('POST', '/regulations', { regulationType: 'SUPPRESS_WITH_DELETE', subjectType: 'USER_ID', subjectIds: ['alice'] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'INITIALIZED');
    const id = created.body.id as string;
    const done = await eventually(async () => {
      const { body } = await nodeA.admin('GET', `/regulations/${id}`);
      return body.status === 'FINISHED' || body.status === 'FAILED' ? body : undefined;
    }, 20_000, `regulation ${id} to end`);
    assert.equal(done.status, 'FINISHED', JSON.stringify(done));
    assert.ok(done.sources.length >= 2 && done.sources.every((s: any) => s.status === 'FINISHED'), JSON.stringify(done.sources));

    const store = nodeA.store;
    const onHooked = await store.listRecentMessages(hooked.id, 100);
    assert.deepEqual(
      onHooked.map((m) => [m.userId, m.type]).sort(),
      [
        ['alice', 'delete'],
        ['bob', 'track'],
      ],
      'alice\'s messages are erased, bob\'s stay',
    );
    assert.deepEqual(await store.listRecentMessages(plain.id, 100), [], 'no destination: nothing sent, nothing left');
    const deleteMessage = onHooked.find((m) => m.type === 'delete')!;
    const deleteJobs = (await store.listDeliveries({ sourceId: hooked.id, limit: 100 })).filter((d) => d.messageSeq === deleteMessage.seq);
    assert.equal(deleteJobs.length, 1, 'one delete delivery for the source with Webhooks');
    assert.deepEqual(await store.listDeliveries({ sourceId: plain.id, limit: 100 }), []);
    await eventually(() => (receiver.requests.some((r) => JSON.parse(r.body).type === 'delete') ? true : undefined), 10_000, 'the delete at the receiver');
    const sent = JSON.parse(receiver.requests.find((r) => JSON.parse(r.body).type === 'delete')!.body);
    assert.equal(sent.userId, 'alice');
    assert.equal(sent.messageId, deleteMessage.messageId);

    // The node that answered holds the suppression from its answer on.
    assert.equal((await nodeB.send('/v1/track', hooked.writeKey, { userId: 'alice', event: 'After' })).status, 200);
    const [later] = await store.listRecentMessages(hooked.id, 1);
    assert.equal(later?.status, 'suppressed');
    assert.equal(later?.reason, `user is suppressed by regulation ${id}`);
    assert.deepEqual((await store.listDeliveries({ sourceId: hooked.id, limit: 100 })).filter((d) => d.messageSeq === later?.seq), []);
    // The other node follows within a second (NOTIFY, else its poll).
    await eventually(async () => {
      await nodeA.send('/v1/track', plain.writeKey, { userId: 'alice', event: 'After, elsewhere' });
      const [latest] = await store.listRecentMessages(plain.id, 1);
      return latest?.status === 'suppressed' ? true : undefined;
    }, 10_000, 'node A to suppress alice');
  });

  it('streams to a debugger open on one node the messages another node takes', { timeout: 30_000 }, async () => {
    const source = await nodeA.createSource('live');
    // The stream's node is this test's own, so that it can close it with the
    // stream open (as a shutdown does) and see the stream end.
    const viewer = await startNode();
    let reader: SseReader | undefined;
    try {
      // Nodes LISTEN from their start; wait for it, since a notification sent
      // before the connection is up is not replayed.
      await eventually(async () => ((await listenerPids(db.url)).length >= 3 ? true : undefined), 10_000, 'every node to LISTEN');
      reader = await SseReader.open(`${viewer.url}/admin/v1/sources/${source.id}/debugger/stream`, { authorization: `Bearer ${TEST_ADMIN_TOKEN}` });
      assert.equal(reader.response.status, 200);
      await reader.until((b) => b.kind === 'comment' && b.text === 'connected');
      assert.equal((await nodeA.send('/v1/track', source.writeKey, { userId: 'u', event: 'Taken by A' })).status, 200);
      const [event] = await reader.events(1);
      assert.equal(event?.data.message.event, 'Taken by A');
      assert.equal(event?.data.status, 'accepted');
      assert.equal(event?.id, String(event?.data.seq));
      await viewer.close();
      await assert.rejects(reader.until(() => false), StreamEnded);
    } finally {
      reader?.close();
      await viewer.close();
    }
  });

  it('logs a lost PostgreSQL connection through the logger, and carries on', { timeout: 30_000 }, async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-test-'));
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const config = loadConfig({ port: '0', host: '127.0.0.1', 'data-dir': dataDir, 'admin-token': TEST_ADMIN_TOKEN, 'database-url': db.url }, {});
    const node = await startSwitchyard(config, logger);
    try {
      const before = await eventually(async () => {
        const pids = await listenerPids(db.url);
        return pids.length >= 3 ? pids : undefined;
      }, 10_000, 'the third node to LISTEN');
      // Every node's LISTEN connection drops; each reconnects.
      await query(db.url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN switchyard_%'`);
      const logged = await eventually(() => lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'PostgreSQL connection error'), 10_000, 'a log line');
      assert.equal(logged.level, 40, 'a warning');
      assert.match(logged.err.message, /LISTEN connection was lost; reconnecting/);
      await eventually(async () => {
        const pids = await listenerPids(db.url);
        return pids.length >= 3 && pids.every((pid) => !before.includes(pid)) ? true : undefined;
      }, 10_000, 'new LISTEN connections');
    } finally {
      await node.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('follows the debugger from the CLI, and refuses a newer schema in one line', { timeout: 30_000 }, async () => {
    const source = await nodeA.createSource('cli');
    await nodeA.send('/v1/track', source.writeKey, { userId: 'u', event: 'Before' });
    const child = spawn(process.execPath, [BIN, 'debugger', source.id, '--follow', '--limit', '1', '--database-url', db.url], { env: CLI_ENV });
    try {
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
      await eventually(() => (out.includes('"event":"Before"') ? true : undefined), 10_000, `the recent message (stderr: ${err})`);
      await sendWhenKnown(nodeB, '/v1/track', source.writeKey, { userId: 'u', event: 'Followed' });
      await eventually(() => (out.includes('"event":"Followed"') ? true : undefined), 10_000, 'the followed message');
      child.kill('SIGINT');
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 0, err);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }

    const newer = await freshDatabase();
    try {
      const store = PostgresStore.open({ databaseUrl: newer.url, durability: 'process' });
      await store.migrate();
      await store.close();
      await query(newer.url, `INSERT INTO schema_migrations (version) VALUES (${SCHEMA_VERSION + 1})`);
      const refused = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, [BIN, 'sources', 'list', '--database-url', newer.url], { env: CLI_ENV, timeout: 20_000 }, (error, _stdout, stderr) =>
          resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr }),
        );
      });
      assert.equal(refused.code, 1);
      // The line saying which store the command used (no password), then the refusal in one line.
      const [using, refusal, ...rest] = refused.stderr.split('\n');
      assert.match(using ?? '', /^switchyard: using PostgreSQL postgres:\/\/[^:@/]*@?127\.0\.0\.1:\d+\/switchyard_test_\w+$/);
      assert.equal(refusal, `switchyard: the database schema is version ${SCHEMA_VERSION + 1}, newer than this Switchyard knows (${SCHEMA_VERSION}); upgrade Switchyard`);
      assert.deepEqual(rest, ['']);
    } finally {
      await newer.drop();
    }
  });
});
