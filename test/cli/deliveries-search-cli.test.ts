import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type CliResult, runCli } from '../helpers/cli.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries } from '../helpers/webhooks.js';

/** The messageIds of the deliveries a `deliveries list` printed, newest first. */
function messageIds(result: CliResult): string[] {
  assert.equal(result.code, 0, result.stderr);
  return (result.json.deliveries as Array<{ messageId: string }>).map((delivery) => delivery.messageId);
}

/**
 * `switchyard deliveries list --user-id --message-id`, on the store
 * (`storeArgs` and `storeEnv` name it) and through the server (`--url`).
 */
function cliSuite(name: string, flags: () => Record<string, string>, storeArgs: (sy: TestSwitchyard) => string[], storeEnv: () => Record<string, string>): void {
  describe(`CLI deliveries list by user and messageId: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let sourceId: string;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ ...FAST_RETRIES, ...flags() });
      const source = await sy.createSource('cli search');
      sourceId = source.id;
      assert.equal((await sy.admin('PUT', `/sources/${sourceId}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }] } })).status, 200);
      for (const [userId, messageId] of [
        ['ada', 'cli-1'],
        ['bob', 'cli-2'],
        ['ada', 'cli-3'],
      ]) {
        assert.equal((await sy.send('/v1/track', source.writeKey, { userId, messageId, event: 'Clicked' })).status, 200);
      }
      await eventually(async () => ((await listDeliveries(sy, sourceId)).length === 3 ? true : undefined), 10_000, 'three deliveries');
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    const ways: Array<[string, () => string[], () => Record<string, string>]> = [
      ['on the store', () => storeArgs(sy), storeEnv],
      ['over --url', () => ['--url', sy.url], () => ({ SWITCHYARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN })],
    ];
    for (const [way, args, env] of ways) {
      it(`filters by --user-id and --message-id, with the message's type, event and user (${way})`, async () => {
        const byUser = await runCli(['deliveries', 'list', '--user-id', 'ada', ...args()], env());
        assert.deepEqual(messageIds(byUser), ['cli-3', 'cli-1']);
        const [newest] = byUser.json.deliveries as Array<Record<string, unknown>>;
        assert.deepEqual([newest!['type'], newest!['event'], newest!['userId']], ['track', 'Clicked', 'ada']);
        assert.deepEqual(messageIds(await runCli(['deliveries', 'list', '--message-id', 'cli-2', ...args()], env())), ['cli-2']);
        assert.deepEqual(messageIds(await runCli(['deliveries', 'list', '--user-id', 'ada', '--message-id', 'cli-2', ...args()], env())), []);
        const pagedArgs = ['--user-id', 'ada', '--source', sourceId, '--status', 'succeeded', '--limit', '1', '--before-id', String(newest!['id'])];
        assert.deepEqual(messageIds(await runCli(['deliveries', 'list', ...pagedArgs, ...args()], env())), ['cli-1']);
      });

      it(`refuses an empty or too long id, naming the flag's field (${way})`, async () => {
        const empty = await runCli(['deliveries', 'list', '--user-id=', ...args()], env());
        assert.equal(empty.code, 1);
        assert.match(empty.stderr, /userId must be a non-empty string of at most 1024 bytes \(UTF-8\)/);
        const long = await runCli(['deliveries', 'list', '--message-id', 'm'.repeat(1_025), ...args()], env());
        assert.equal(long.code, 1);
        assert.match(long.stderr, /messageId must be a non-empty string of at most 1024 bytes \(UTF-8\)/);
      });
    }
  });
}

cliSuite(
  'sqlite',
  () => ({}),
  (sy) => ['--data-dir', sy.dataDir],
  () => ({}),
);

await describePostgres('CLI deliveries list by user and messageId on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  cliSuite(
    'postgres',
    () => ({ 'database-url': db.url }),
    () => [],
    () => ({ DATABASE_URL: db.url }),
  );
});
