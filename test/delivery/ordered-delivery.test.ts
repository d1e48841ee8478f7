import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OrderReceiver } from '../helpers/order-receiver.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries } from '../helpers/webhooks.js';

async function orderedSource(sy: TestSwitchyard, url: string, ordering: 'none' | 'user'): Promise<{ id: string; writeKey: string }> {
  const source = await sy.createSource('ordered');
  const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url }], ordering } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  return source;
}

function track(userId: string, i: number): Record<string, unknown> {
  return { type: 'track', event: 'E', userId, properties: { i } };
}

function suite(flags: () => Record<string, string>): void {
  let sy: TestSwitchyard;
  const receivers: OrderReceiver[] = [];
  before(async () => {
    // A long retry window: a delivery held back with 503s must not fail for good while a test looks at what waits for it.
    sy = await startTestSwitchyard({ ...FAST_RETRIES, 'retry-window-ms': '60000', ...flags() });
  });
  after(async () => {
    await sy?.close();
    for (const receiver of receivers) await receiver.close();
  });

  it('validates settings.ordering and shows it on GET', async () => {
    const source = await sy.createSource('settings');
    const bad = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }], ordering: 'key' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_receivers');
    assert.match(bad.body.error.message, /settings\.ordering/);
    await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }] } });
    assert.equal((await sy.admin('GET', `/sources/${source.id}/destinations/webhooks`)).body.settings.ordering, undefined, 'absent means "none"');
    await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }], ordering: 'user' } });
    assert.equal((await sy.admin('GET', `/sources/${source.id}/destinations/webhooks`)).body.settings.ordering, 'user');
    const transformation = await sy.admin('POST', '/transformations', { name: 'same', code: 'export function transformEvent(e) { return e; }' });
    assert.equal(transformation.status, 201);
    const both = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }], ordering: 'user', transformation: { id: transformation.body.id } },
    });
    assert.equal(both.status, 200, JSON.stringify(both.body));
    const shown = (await sy.admin('GET', `/sources/${source.id}/destinations/webhooks`)).body.settings;
    assert.equal(shown.ordering, 'user');
    assert.equal(shown.transformation.id, transformation.body.id);
  });

  it('shows a delivery waiting behind its key\'s earlier one as pending with waitingFor, and sends it once that one ends', async () => {
    let hold = true;
    const receiver = await new OrderReceiver(() => (hold ? { status: 503, delayMs: 0 } : { status: 200, delayMs: 0 })).listen();
    receivers.push(receiver);
    const source = await orderedSource(sy, receiver.url, 'user');
    await sy.send('/v1/batch', source.writeKey, { batch: [track('a', 0), track('a', 1), track('b', 2)] });
    await eventually(() => (receiver.answered.size === 0 && receiver.arrivals.some((a) => a.key === 'a') && receiver.arrivals.some((a) => a.key === 'b') ? true : undefined));
    const listed = await listDeliveries(sy, source.id);
    const [first, second] = listed.filter((d: any) => d.messageSeq !== listed.at(-1)).sort((x: any, y: any) => x.id - y.id);
    const waiting = (await sy.admin('GET', `/deliveries/${second.id}`)).body;
    assert.equal(waiting.status, 'pending');
    assert.equal(waiting.waitingFor, first.id);
    assert.equal(waiting.attemptCount, 0);
    assert.equal((await sy.admin('GET', `/deliveries/${first.id}`)).body.waitingFor, undefined);
    assert.ok(receiver.arrivals.every((a) => a.index !== 1), 'the second message of a is not sent while the first is retried');
    hold = false;
    await eventually(() => (receiver.answered.size === 3 ? true : undefined), 15_000, 'all three answered');
    assert.deepEqual(receiver.inversions(), []);
    assert.deepEqual(receiver.overlaps, []);
    assert.equal((await sy.admin('GET', `/deliveries/${second.id}`)).body.waitingFor, undefined);
  });

  it('through a transformation: a drop hands its place to the delivery before it, a split sends its parts in turn, and later messages wait for all of them', async () => {
    let hold = true;
    // The first message is refused until released: everything after it must wait.
    const receiver = await new OrderReceiver((_, message) => (hold && message.index === 0 ? { status: 503, delayMs: 0 } : { status: 200, delayMs: 0 })).listen();
    receivers.push(receiver);
    const transformation = await sy.admin('POST', '/transformations', {
      name: 'fates',
      code: `export function transformEvent(e) {
        const p = e.properties;
        if (p.fate === 'drop') return null;
        if (p.fate === 'split') return [0, 1].map((k) => ({ ...e, properties: { ...p, i: p.i * 10 + k } }));
        return { ...e, properties: { ...p, i: p.i * 10 } };
      }`,
    });
    const source = await sy.createSource('transformed');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      settings: { webhooks: [{ url: receiver.url }], ordering: 'user', transformation: { id: transformation.body.id } },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const message = (i: number, fate: string): Record<string, unknown> => ({ type: 'track', event: 'E', userId: 'a', properties: { i, fate } });
    await sy.send('/v1/batch', source.writeKey, { batch: [message(0, 'keep'), message(1, 'drop'), message(2, 'split')] });
    const transformed = async (count: number): Promise<any[] | undefined> => {
      const listed = await listDeliveries(sy, source.id);
      return listed.length === count && listed.every((d: any) => d.status !== 'transforming') ? listed : undefined;
    };
    await eventually(() => transformed(3), 10_000, 'the first request transformed');
    // After the drop is stored: the key's tail moved from the dropped delivery to the one before it.
    await sy.send('/v1/batch', source.writeKey, { batch: [message(3, 'keep')] });
    const listed = await eventually(() => transformed(4), 10_000, 'the second request transformed');
    await eventually(() => (receiver.arrivals.length > 0 ? true : undefined));
    const byId = new Map(listed.map((d: any) => [d.id, d]));
    assert.deepEqual(
      listed.map((d: any) => d.status),
      ['pending', 'pending', 'pending', 'pending'],
      'nothing sent for good while the first message is retried',
    );
    const heads = listed.filter((d: any) => d.waitingFor === undefined);
    assert.equal(heads.length, 1, `one delivery is due, the others wait: ${JSON.stringify(listed)}`);
    // Each waits for another, all in one line back to the first message's delivery.
    const waitedFor = new Set(listed.map((d: any) => d.waitingFor));
    assert.equal(waitedFor.size, 4, 'no two deliveries wait for the same one');
    for (const delivery of listed) {
      let at = delivery;
      for (let steps = 0; at.waitingFor !== undefined && steps < 4; steps++) at = byId.get(at.waitingFor);
      assert.equal(at.id, heads[0].id);
    }
    assert.ok(receiver.arrivals.every((a) => a.index === 0), 'nothing after the first message is sent while it is retried');
    hold = false;
    await eventually(() => (receiver.answered.size === 4 ? true : undefined), 15_000, 'the four outputs answered');
    assert.deepEqual(
      receiver.arrivals.map((a) => a.index).filter((index, n, all) => all.indexOf(index) === n),
      [0, 20, 21, 30],
      'in order, the split\'s parts in turn, nothing of the dropped message',
    );
    assert.deepEqual(receiver.overlaps, []);
  });

  it('a delivery created behind one still transforming waits for it (the transformation detached in between)', async () => {
    const receiver = await new OrderReceiver(() => ({ status: 200, delayMs: 0 })).listen();
    receivers.push(receiver);
    // Slow enough that the second message is processed while the first is still transforming.
    const transformation = await sy.admin('POST', '/transformations', {
      name: 'slow',
      code: `export function transformEvent(e) {
        const until = Date.now() + 2500;
        while (Date.now() < until);
        return e;
      }`,
    });
    const source = await sy.createSource('detached');
    const settings = { webhooks: [{ url: receiver.url }], ordering: 'user' };
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { ...settings, transformation: { id: transformation.body.id } } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await sy.send('/v1/batch', source.writeKey, { batch: [track('d', 0)] });
    const [first] = await eventually(async () => {
      const listed = await listDeliveries(sy, source.id);
      return listed.length === 1 && listed[0].status === 'transforming' ? listed : undefined;
    });
    assert.equal((await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings })).status, 200);
    await sy.send('/v1/batch', source.writeKey, { batch: [track('d', 1)] });
    const second = await eventually(async () => (await listDeliveries(sy, source.id, 'pending')).find((d: any) => d.id !== first.id));
    const stillTransforming = (await sy.admin('GET', `/deliveries/${first.id}`)).body.status === 'transforming';
    if (stillTransforming) assert.equal(second.waitingFor, first.id, 'created pending behind a delivery still transforming: it waits for it');
    await eventually(() => (receiver.answered.size === 2 ? true : undefined), 15_000, 'both answered');
    assert.deepEqual(
      receiver.arrivals.map((a) => a.index),
      [0, 1],
    );
    assert.ok(stillTransforming, 'the first delivery was still transforming when the second was created (the test checked what it means to)');
  });

  it('a replay keeps each user\'s order (3 users x 10 messages, answers after 0-40 ms), with ordering "none"', async () => {
    const random = seededRandom(7);
    const receiver = await new OrderReceiver(() => ({ status: 200, delayMs: Math.floor(random() * 40) })).listen();
    receivers.push(receiver);
    const source = await orderedSource(sy, receiver.url, 'none');
    const from = new Date(Date.now() - 1_000).toISOString();
    const batch = [];
    for (let i = 0; i < 30; i++) batch.push(track(`r${i % 3}`, i));
    await sy.send('/v1/batch', source.writeKey, { batch });
    await eventually(() => (receiver.answered.size === 30 ? true : undefined), 15_000, 'the live deliveries');
    const created = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to: new Date(Date.now() + 1_000).toISOString() });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const replayId = created.body.id as string;
    await eventually(async () => ((await sy.admin('GET', `/replays/${replayId}`)).body.status === 'done' ? true : undefined), 30_000, 'the replay to end');
    const replayed = (a: { replay: string | undefined }): boolean => a.replay === replayId;
    assert.equal(receiver.arrivals.filter(replayed).length, 30);
    assert.deepEqual(receiver.inversions(replayed), [], 'each user\'s replayed messages in order');
    // Counted apart from the live copies (ordering "none": those may overlap).
    assert.deepEqual(receiver.overlaps.filter(replayed), [], 'never two replayed requests of one user open at once');
  });

  it('a key with a long backlog does not hold up other keys (by order of arrival)', async () => {
    const receiver = await new OrderReceiver(() => ({ status: 200, delayMs: 2 })).listen();
    receivers.push(receiver);
    const source = await orderedSource(sy, receiver.url, 'user');
    const heavy = [];
    for (let i = 0; i < 300; i++) heavy.push(track('heavy', i));
    await sy.send('/v1/batch', source.writeKey, { batch: heavy });
    const others = [];
    for (let i = 0; i < 15; i++) others.push(track(`light${i % 5}`, 300 + i));
    await sy.send('/v1/batch', source.writeKey, { batch: others });
    await eventually(() => (receiver.answered.size === 315 ? true : undefined), 60_000, 'every message');
    const lastLight = receiver.arrivals.findLastIndex((a) => a.key.startsWith('light'));
    const heavyBefore = receiver.arrivals.slice(0, lastLight).filter((a) => a.key === 'heavy').length;
    assert.ok(heavyBefore < 200, `the light keys were all delivered after ${heavyBefore} of heavy's 300 messages`);
    assert.deepEqual(receiver.inversions(), []);
    assert.deepEqual(receiver.overlaps, []);
    // Every outcome is recorded in the end, none left waiting.
    await eventually(async () => ((await listDeliveries(sy, source.id, 'pending')).length === 0 ? true : undefined), 10_000, 'no delivery pending');
  });
}

describe('ordered delivery (SQLite)', { timeout: 180_000 }, () => {
  suite(() => ({}));
});

await describePostgres('ordered delivery (PostgreSQL)', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  suite(() => ({ 'database-url': db.url }));
});
