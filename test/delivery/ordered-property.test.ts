import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { OrderReceiver, type OrderReply } from '../helpers/order-receiver.js';
import { describePostgres, freshDatabase } from '../helpers/postgres.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually } from '../helpers/switchyard.js';

const MESSAGES = 120;
const USERS = 6;
const PER_REQUEST = 6;
const TIMEOUT_MS = 300;

const ENV = {
  SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
  SWITCHYARD_DELIVERY_TIMEOUT_MS: String(TIMEOUT_MS),
  SWITCHYARD_RETRY_BASE_MS: '20',
  SWITCHYARD_RETRY_MAX_DELAY_MS: '200',
  SWITCHYARD_RETRY_WINDOW_MS: '120000',
};

interface Scenario {
  readonly ordering: 'none' | 'user';
  readonly seed: number;
  /** `serve` processes on the store (several only on PostgreSQL). */
  readonly nodes: number;
  /** Kill the first node with SIGKILL halfway through the sending, while messages are in flight, and start it again. */
  readonly killHalfway: boolean;
}

/**
 * Random users, random answer delays (0-40 ms), random 5xx and timeouts,
 * several requests of messages sent one after the other (so processing
 * order is sending order), optionally a node killed and restarted halfway.
 * Resolves the receiver once every message was answered 2xx.
 */
async function run(storeEnv: () => Promise<Record<string, string>>, scenario: Scenario): Promise<OrderReceiver> {
  const random = seededRandom(scenario.seed);
  const answers = seededRandom(scenario.seed + 1);
  const receiver = await new OrderReceiver((): OrderReply => {
    const r = answers();
    if (r < 0.12) return { status: 503, delayMs: Math.floor(answers() * 20) };
    if (r < 0.16) return { status: 200, delayMs: TIMEOUT_MS * 2 }; // the sender times out
    return { status: 200, delayMs: Math.floor(answers() * 40) };
  }).listen();
  const env = { ...ENV, ...(await storeEnv()) };
  const nodes: ChildSwitchyard[] = [];
  try {
    for (let i = 0; i < scenario.nodes; i++) nodes.push(await startChildSwitchyard(env));
    const admin = async (method: string, route: string, body?: unknown): Promise<any> => {
      const response = await fetch(`${nodes.at(-1)!.url}/admin/v1${route}`, {
        method,
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: await response.json() };
    };
    const source = (await admin('POST', '/sources', { name: 'ordered' })).body as { id: string; writeKey: string };
    const put = await admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }], ordering: scenario.ordering } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.settings.ordering ?? 'none', scenario.ordering);
    // Every node reads the destination before the first message.
    await new Promise((resolve) => setTimeout(resolve, 1_200));

    for (let start = 0, request = 0; start < MESSAGES; start += PER_REQUEST, request++) {
      if (scenario.killHalfway && start === MESSAGES / 2) {
        await eventually(() => (receiver.arrivals.length > 0 ? true : undefined), 20_000, 'deliveries in flight');
        await nodes[0]!.kill('SIGKILL');
        nodes[0] = await startChildSwitchyard(env);
      }
      const batch = [];
      for (let i = start; i < Math.min(MESSAGES, start + PER_REQUEST); i++) {
        const user = `u${Math.floor(random() * USERS)}`;
        // A third of the users are known only by an anonymousId: the key then.
        const who = Number(user.slice(1)) % 3 === 0 ? { anonymousId: user } : { userId: user };
        batch.push({ type: 'track', event: 'E', ...who, properties: { i } });
      }
      const node = nodes[request % nodes.length]!;
      const response = await fetch(`${node.url}/v1/batch`, {
        method: 'POST',
        headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/json' },
        body: JSON.stringify({ batch }),
      });
      assert.equal(response.status, 200);
    }
    await eventually(() => (receiver.answered.size === MESSAGES ? true : undefined), 120_000, `all ${MESSAGES} messages answered 2xx`);
    return receiver;
  } finally {
    for (const node of nodes) await node.kill('SIGKILL');
    await receiver.close();
  }
}

function suite(storeEnv: () => Promise<Record<string, string>>, nodes: number): void {
  it('with ordering "user": no key ever has two requests open at the receiver, and each key arrives in processing order, across a kill -9', async () => {
    for (const seed of [11, 12]) {
      const receiver = await run(storeEnv, { ordering: 'user', seed, nodes, killHalfway: seed === 11 });
      assert.deepEqual(receiver.overlaps, [], `seed ${seed}`);
      assert.deepEqual(receiver.inversions(), [], `seed ${seed}`);
    }
  });

  it('the same generator with ordering "none" breaks the rule (the check can fail)', async () => {
    const receiver = await run(storeEnv, { ordering: 'none', seed: 11, nodes, killHalfway: false });
    assert.ok(receiver.overlaps.length + receiver.inversions().length > 0, 'without ordering, some key overlapped or arrived out of order');
  });
}

describe('ordered delivery, property (SQLite, one node restarted)', { timeout: 300_000 }, () => {
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });
  suite(async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-ordered-'));
    dirs.push(dir);
    return { SWITCHYARD_DATA_DIR: dir };
  }, 1);
});

await describePostgres('ordered delivery, property (two nodes on one PostgreSQL, one killed and restarted)', () => {
  const drops: Array<() => Promise<void>> = [];
  after(async () => {
    for (const drop of drops) await drop();
  });
  suite(async () => {
    const db = await freshDatabase();
    drops.push(() => db.drop());
    return { DATABASE_URL: db.url };
  }, 2);
});
