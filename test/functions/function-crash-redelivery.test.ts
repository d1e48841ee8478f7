import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { type FreshDatabase, describePostgres, freshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

/** Posts each track's messageId to the tool's API; what it does not hear back about is retried. */
const RELAY = `
async function onTrack(event, settings) {
  const res = await fetch(settings.url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ messageId: event.messageId }) });
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

function crashSuite(name: string, storeEnv: (dataDir: string) => Record<string, string>, restartWithinMs: number): void {
describe(`kill -9 during a function call (${name})`, () => {
  let dataDir: string;
  let receiver: TestReceiver;
  let child: ChildSwitchyard | undefined;

  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-fn-crash-'));
    receiver = await startReceiver();
  });
  after(async () => {
    await child?.kill();
    receiver?.release();
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const env = (): Record<string, string> => ({
    ...storeEnv(dataDir),
    SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
    SWITCHYARD_RETRY_BASE_MS: '20',
    SWITCHYARD_RETRY_MAX_DELAY_MS: '200',
  });
  const call = async (url: string, method: string, route: string, body: unknown, authorization: string): Promise<any> => {
    const response = await fetch(url + route, { method, headers: { authorization, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    assert.ok(response.ok, `${method} ${route}: ${response.status}`);
    return response.status === 204 ? undefined : response.json();
  };

  it('makes the call again after a restart: the request the killed node had open reaches the API again', { timeout: 90_000 }, async () => {
    const admin = `Bearer ${TEST_ADMIN_TOKEN}`;
    child = await startChildSwitchyard(env());
    const source = await call(child.url, 'POST', '/admin/v1/sources', { name: 'fn-crash' }, admin);
    const fn = await call(child.url, 'POST', `/admin/v1/sources/${source.id}/destinations/functions`, { name: 'Relay', code: RELAY, settings: { url: receiver.url } }, admin);

    // The first request hangs: the function's call is open (its fetch awaiting the answer) when the node dies.
    receiver.reply = (_request, index) => (index === 0 ? { hang: true } : { status: 200 });
    await call(child.url, 'POST', '/v1/track', { userId: 'u', event: 'Paid', messageId: 'crash-fn-1' }, basicAuth(source.writeKey));
    await eventually(() => (receiver.hanging() === 1 ? true : undefined), 20_000, 'the function call in flight');
    assert.deepEqual(JSON.parse(receiver.requests[0]!.body), { messageId: 'crash-fn-1' });
    await child.kill('SIGKILL');
    child = undefined;

    child = await startChildSwitchyard(env());
    const again = await eventually(() => (receiver.requests.length >= 2 ? receiver.requests[1] : undefined), restartWithinMs, 'the call made again after the restart');
    assert.deepEqual(JSON.parse(again.body), { messageId: 'crash-fn-1' });
    const done = await eventually(async () => {
      const listed = await call(child!.url, 'GET', `/admin/v1/deliveries?sourceId=${source.id}&limit=10`, undefined, admin);
      const [delivery] = listed.deliveries as Array<{ id: string; status: string; functionId?: string }>;
      return delivery?.status === 'succeeded' ? delivery : undefined;
    }, 20_000, 'the delivery to succeed');
    assert.equal(done.functionId, fn.id);
    const detail = await call(child.url, 'GET', `/admin/v1/deliveries/${done.id}`, undefined, admin);
    const last = detail.attempts.at(-1);
    assert.equal(last.url, `function:${fn.id}`);
    assert.equal(last.function.outcome, 'delivered');
    assert.deepEqual(last.function.fetches.map((f: { method: string; status: number }) => [f.method, f.status]), [['POST', 200]]);
  });
});
}

// SQLite: the restarted node frees the dead one's leases (one node per folder).
crashSuite('sqlite', (dataDir) => ({ SWITCHYARD_DATA_DIR: dataDir }), 30_000);

// PostgreSQL: the dead node's lease runs out (the delivery timeout + 30 s), then another node makes the call.
await describePostgres('kill -9 during a function call on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  crashSuite('postgres', (dataDir) => ({ DATABASE_URL: db.url, SWITCHYARD_DATA_DIR: dataDir }), 60_000);
});
