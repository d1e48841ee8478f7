/**
 * What the ordered-delivery property tests share: the nodes' settings (short
 * timeouts and retries), a receiver that answers late, with 5xx or not in
 * time at random, `serve` processes with an admin client, the messages'
 * keys, and the two stores the property must hold on.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from './child-switchyard.js';
import { OrderReceiver, type OrderReply } from './order-receiver.js';
import { describePostgres, freshDatabase } from './postgres.js';
import { seededRandom } from './seeded-random.js';
import { TEST_ADMIN_TOKEN, basicAuth, untilKeyKnown } from './switchyard.js';

/** The delivery timeout of the nodes: the receiver answers some requests after twice this. */
export const ORDERED_TIMEOUT_MS = 300;

export const ORDERED_ENV = {
  SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true',
  SWITCHYARD_DELIVERY_TIMEOUT_MS: String(ORDERED_TIMEOUT_MS),
  SWITCHYARD_RETRY_BASE_MS: '20',
  SWITCHYARD_RETRY_MAX_DELAY_MS: '200',
  SWITCHYARD_RETRY_WINDOW_MS: '120000',
};

/** Where a suite's nodes keep their data: a fresh SQLite directory or PostgreSQL database per run. */
export type StoreEnv = () => Promise<Record<string, string>>;

/** Answers in 0-40 ms, with a 503 to 12% of requests and too late (the sender times out) to 4%, from `seed`. */
export function flakyOrderReceiver(seed: number): Promise<OrderReceiver> {
  const answers = seededRandom(seed);
  return new OrderReceiver((): OrderReply => {
    const r = answers();
    if (r < 0.12) return { status: 503, delayMs: Math.floor(answers() * 20) };
    if (r < 0.16) return { status: 200, delayMs: ORDERED_TIMEOUT_MS * 2 }; // the sender times out
    return { status: 200, delayMs: Math.floor(answers() * 40) };
  }).listen();
}

export interface OrderedNodes {
  /** Mutable: a test may replace a node it killed. */
  readonly nodes: ChildSwitchyard[];
  /** The admin API of the last node. */
  readonly admin: (method: string, route: string, body?: unknown) => Promise<{ status: number; body: any }>;
  /** `POST /v1/batch` of the `request`th request, to the nodes in turn; asserts its 200. */
  readonly sendBatch: (request: number, writeKey: string, batch: readonly unknown[]) => Promise<void>;
  /** Kills every node (SIGKILL). */
  readonly stop: () => Promise<void>;
}

export async function startOrderedNodes(env: Record<string, string>, count: number): Promise<OrderedNodes> {
  const nodes: ChildSwitchyard[] = [];
  const stop = async (): Promise<void> => {
    for (const node of nodes) await node.kill('SIGKILL');
  };
  try {
    for (let i = 0; i < count; i++) nodes.push(await startChildSwitchyard(env));
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    admin: async (method, route, body) => {
      const response = await fetch(`${nodes.at(-1)!.url}/admin/v1${route}`, {
        method,
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: await response.json() };
    },
    sendBatch: async (request, writeKey, batch) => {
      const node = nodes[request % nodes.length]!;
      const response = await untilKeyKnown(node.url, async () => {
        const answer = await fetch(`${node.url}/v1/batch`, {
          method: 'POST',
          headers: { authorization: basicAuth(writeKey), 'content-type': 'application/json' },
          body: JSON.stringify({ batch }),
        });
        await answer.arrayBuffer();
        return answer;
      });
      assert.equal(response.status, 200);
    },
    stop,
  };
}

/** A random one of `users` users; a third of them are known only by an anonymousId (the key then). */
export function randomKeyed(random: () => number, users: number): { userId: string } | { anonymousId: string } {
  const user = `u${Math.floor(random() * users)}`;
  return Number(user.slice(1)) % 3 === 0 ? { anonymousId: user } : { userId: user };
}

/**
 * The suite on SQLite (one node, a fresh directory per run) and on
 * PostgreSQL (two nodes, a fresh database per run); `names` are the two
 * describe blocks' names.
 */
export async function describeOnBothStores(
  names: { readonly sqlite: string; readonly postgres: string },
  timeoutMs: number,
  suite: (storeEnv: StoreEnv, nodes: number) => void,
): Promise<void> {
  describe(names.sqlite, { timeout: timeoutMs }, () => {
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
  await describePostgres(names.postgres, () => {
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
}
