/**
 * Ordered delivery through a transformation that drops, splits and fails
 * messages: each key's outputs still go out one at a time, in processing
 * order (a split's parts in turn), a drop or a failure holds nobody back,
 * and a replay (which runs the transformation again) keeps the same order.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { OrderReceiver } from '../helpers/order-receiver.js';
import { ORDERED_ENV, type StoreEnv, describeOnBothStores, flakyOrderReceiver, randomKeyed, startOrderedNodes } from '../helpers/ordered-rig.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { eventually } from '../helpers/switchyard.js';

const MESSAGES = 120;
const USERS = 5;
const PER_REQUEST = 4;
/** A message's outputs are numbered i × PARTS + part, so the receiver's order check covers a split's parts. */
const PARTS = 4;

/** What the transformation does with a message is written in it, so the test knows what must arrive. */
const CODE = `export function transformEvent(event) {
  const p = event.properties;
  if (p.fate === 'drop') return null;
  if (p.fate === 'fail') throw new Error('refused ' + p.i);
  if (p.fate === 'split') {
    const parts = [];
    for (let k = 0; k < p.parts; k++) parts.push({ ...event, properties: { ...p, i: p.i * ${PARTS} + k } });
    return parts;
  }
  return { ...event, properties: { ...p, i: p.i * ${PARTS} } };
}`;

type Fate = { fate: 'drop' } | { fate: 'fail' } | { fate: 'keep' } | { fate: 'split'; parts: number };

function fateOf(random: () => number): Fate {
  const r = random();
  if (r < 0.15) return { fate: 'drop' };
  if (r < 0.25) return { fate: 'fail' };
  if (r < 0.6) return { fate: 'split', parts: 1 + Math.floor(random() * 3) };
  return { fate: 'keep' };
}

/** The outputs' indexes a message must arrive as. */
function outputsOf(i: number, fate: Fate): number[] {
  if (fate.fate === 'drop' || fate.fate === 'fail') return [];
  if (fate.fate === 'keep') return [i * PARTS];
  return Array.from({ length: fate.parts }, (_, k) => i * PARTS + k);
}

interface Outcome {
  readonly receiver: OrderReceiver;
  readonly expected: Set<number>;
  readonly replayId: string | undefined;
}

/**
 * Random users and fates, random answer delays (0-40 ms), random 5xx and
 * timeouts, requests sent one after the other (processing order is sending
 * order); once every expected output was answered 2xx, optionally a replay
 * of them all. Resolves when every expected output (and the replay's) was
 * answered 2xx.
 */
async function run(storeEnv: StoreEnv, ordering: 'none' | 'user', seed: number, nodeCount: number, replay: boolean): Promise<Outcome> {
  const random = seededRandom(seed);
  const receiver = await flakyOrderReceiver(seed + 1);
  const env = { ...ORDERED_ENV, ...(await storeEnv()) };
  const { admin, sendBatch, stop } = await startOrderedNodes(env, nodeCount).catch(async (error: unknown) => {
    await receiver.close();
    throw error;
  });
  try {
    const source = (await admin('POST', '/sources', { name: 'ordered' })).body as { id: string; writeKey: string };
    const transformation = await admin('POST', '/transformations', { name: 'fates', code: CODE });
    assert.equal(transformation.status, 201, JSON.stringify(transformation.body));
    const put = await admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      settings: { webhooks: [{ url: receiver.url }], ordering, transformation: { id: transformation.body.id } },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    // Every node reads the destination before the first message.
    await new Promise((resolve) => setTimeout(resolve, 1_200));

    const from = new Date(Date.now() - 1_000).toISOString();
    const expected = new Set<number>();
    for (let start = 0, request = 0; start < MESSAGES; start += PER_REQUEST, request++) {
      const batch = [];
      for (let i = start; i < Math.min(MESSAGES, start + PER_REQUEST); i++) {
        const who = randomKeyed(random, USERS);
        const fate = fateOf(random);
        for (const index of outputsOf(i, fate)) expected.add(index);
        batch.push({ type: 'track', event: 'E', ...who, properties: { i, ...fate } });
      }
      await sendBatch(request, source.writeKey, batch);
    }
    const live = (): Set<number> => receiver.answeredBy.get('live') ?? new Set();
    await eventually(() => (live().size === expected.size ? true : undefined), 120_000, `all ${expected.size} live outputs answered 2xx`);
    if (!replay) return { receiver, expected, replayId: undefined };

    const created = await admin('POST', `/sources/${source.id}/replays`, { from, to: new Date(Date.now() + 1_000).toISOString() });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const replayId = created.body.id as string;
    await eventually(async () => ((await admin('GET', `/replays/${replayId}`)).body.status === 'done' ? true : undefined), 120_000, 'the replay to end');
    return { receiver, expected, replayId };
  } finally {
    await stop();
    await receiver.close();
  }
}

function assertOrdered(outcome: Outcome, seed: number): void {
  const { receiver, expected, replayId } = outcome;
  const live = (a: { replay: string | undefined }): boolean => a.replay === undefined;
  assert.deepEqual(receiver.overlaps.filter(live), [], `seed ${seed}: never two requests of one key open at once`);
  assert.deepEqual(receiver.inversions(live), [], `seed ${seed}: each key's outputs in processing order, a split's parts in turn`);
  const arrived = new Set(receiver.arrivals.filter(live).map((a) => a.index));
  assert.deepEqual([...arrived].filter((index) => !expected.has(index)), [], `seed ${seed}: nothing dropped or failed arrives`);
  assert.deepEqual([...expected].filter((index) => !arrived.has(index)), [], `seed ${seed}: every output arrives (those after a drop or a failure too)`);
  if (replayId === undefined) return;
  const replayed = (a: { replay: string | undefined }): boolean => a.replay === replayId;
  assert.deepEqual(receiver.overlaps.filter(replayed), [], `seed ${seed}: replayed, never two requests of one key open at once`);
  assert.deepEqual(receiver.inversions(replayed), [], `seed ${seed}: replayed in processing order`);
  assert.deepEqual(
    [...(receiver.answeredBy.get(replayId) ?? [])].sort((x, y) => x - y),
    [...expected].sort((x, y) => x - y),
    `seed ${seed}: the replay delivers the same outputs (a failed message is not replayed)`,
  );
}

function suite(storeEnv: StoreEnv, nodes: number): void {
  it('with ordering "user" and a transformation that drops, splits and fails: one request per key at a time, in order, nothing lost or extra, and a replay alike', async () => {
    for (const seed of [21, 22]) {
      assertOrdered(await run(storeEnv, 'user', seed, nodes, seed === 21), seed);
    }
  });

  it('the same generator with ordering "none" breaks the rule (the check can fail)', async () => {
    const { receiver } = await run(storeEnv, 'none', 21, nodes, false);
    assert.ok(receiver.overlaps.length + receiver.inversions().length > 0, 'without ordering, some key overlapped or arrived out of order');
  });
}

await describeOnBothStores(
  { sqlite: 'ordered delivery through a transformation, property (SQLite)', postgres: 'ordered delivery through a transformation, property (two nodes on one PostgreSQL)' },
  600_000,
  suite,
);
