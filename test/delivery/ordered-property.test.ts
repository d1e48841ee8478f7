import assert from 'node:assert/strict';
import { it } from 'node:test';
import { startChildSwitchyard } from '../helpers/child-switchyard.js';
import type { OrderReceiver } from '../helpers/order-receiver.js';
import { ORDERED_ENV, type StoreEnv, describeOnBothStores, flakyOrderReceiver, randomKeyed, startOrderedNodes } from '../helpers/ordered-rig.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { eventually } from '../helpers/switchyard.js';

const MESSAGES = 120;
const USERS = 6;
const PER_REQUEST = 6;

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
async function run(storeEnv: StoreEnv, scenario: Scenario): Promise<OrderReceiver> {
  const random = seededRandom(scenario.seed);
  const receiver = await flakyOrderReceiver(scenario.seed + 1);
  const env = { ...ORDERED_ENV, ...(await storeEnv()) };
  const { nodes, admin, sendBatch, stop } = await startOrderedNodes(env, scenario.nodes).catch(async (error: unknown) => {
    await receiver.close();
    throw error;
  });
  try {
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
        batch.push({ type: 'track', event: 'E', ...randomKeyed(random, USERS), properties: { i } });
      }
      await sendBatch(request, source.writeKey, batch);
    }
    await eventually(() => (receiver.answered.size === MESSAGES ? true : undefined), 120_000, `all ${MESSAGES} messages answered 2xx`);
    return receiver;
  } finally {
    await stop();
    await receiver.close();
  }
}

function suite(storeEnv: StoreEnv, nodes: number): void {
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

await describeOnBothStores(
  { sqlite: 'ordered delivery, property (SQLite, one node restarted)', postgres: 'ordered delivery, property (two nodes on one PostgreSQL, one killed and restarted)' },
  300_000,
  suite,
);
