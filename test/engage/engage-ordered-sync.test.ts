/**
 * Ordered delivery covers Engage's identify syncs (README, "Ordered
 * delivery per user": they are keyed like any identify). A user's track to an
 * ordered destination is answered 503 and retried; the audience sync that
 * track causes must wait behind it (pending, `waitingFor` the track's
 * delivery, nothing sent), and go only once the track has its 2xx.
 * Unordered, the sync would overtake the track while it waits for a retry.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { listDeliveries } from '../helpers/webhooks.js';

/** Retries come fast, and go on long enough that the track is still retried when its sync is queued. */
const RETRIES = { 'allow-private-receivers': 'true', 'retry-base-ms': '50', 'retry-max-delay-ms': '200', 'retry-window-ms': '600000' };

interface Arrival {
  readonly type: string;
  readonly userId: string;
}

function suite(flags: () => Record<string, string>): void {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;
  before(async () => {
    sy = await startTestSwitchyard({ ...RETRIES, ...flags() });
    receiver = await startReceiver();
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });

  it('an audience sync waits behind the track that caused it while that track is retried', { timeout: 90_000 }, async () => {
    let holdTracks = true;
    receiver.reply = (request) => ((JSON.parse(request.body) as { type: string }).type === 'track' && holdTracks ? { status: 503 } : { status: 200 });
    const arrivals = (): Arrival[] => receiver.requests.map((r) => JSON.parse(r.body) as Arrival);

    const source = await sy.createSource('ordered-engage');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }], ordering: 'user' } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const audience = await sy.admin('POST', '/audiences', { name: 'Buyers', definition: { performed: { event: 'Order Completed' } }, destinations: [source.id] });
    assert.equal(audience.status, 201, JSON.stringify(audience.body));
    await eventually(async () => ((await sy.admin('GET', `/audiences/${audience.body.id}`)).body.status === 'live' ? true : undefined), 20_000, 'the audience to be live');

    await sy.send('/v1/track', source.writeKey, { userId: 'buyer', event: 'Order Completed' });
    // The sync is queued while the track is being retried, and waits for it.
    const [trackDelivery, syncDelivery] = await eventually(async () => {
      const listed = (await listDeliveries(sy, source.id)).sort((a: any, b: any) => a.id - b.id);
      return listed.length === 2 && arrivals().some((a) => a.type === 'track') ? listed : undefined;
    }, 30_000, 'the track retried and its audience sync queued');
    const waiting = (await sy.admin('GET', `/deliveries/${syncDelivery.id}`)).body;
    assert.equal(waiting.status, 'pending');
    assert.equal(waiting.waitingFor, trackDelivery.id, 'the sync waits for the track of the same user');
    // Give an unordered sync every chance to overtake: several more retries of the track.
    const triesBefore = arrivals().length;
    await eventually(() => (arrivals().length >= triesBefore + 3 ? true : undefined), 20_000, 'more retries of the track');
    assert.deepEqual(arrivals().filter((a) => a.type !== 'track'), [], 'nothing but the track is sent while it is retried');

    holdTracks = false;
    await eventually(() => (arrivals().some((a) => a.type === 'identify') ? true : undefined), 30_000, 'the sync after the track');
    const types = arrivals().map((a) => a.type);
    const firstIdentify = types.indexOf('identify');
    assert.ok(types.slice(firstIdentify).every((type) => type === 'identify'), `the sync came after every try of the track: ${types.join(', ')}`);
    assert.ok(arrivals().every((a) => a.userId === 'buyer'));
  });
}

describe('Engage syncs to an ordered destination (SQLite)', () => {
  suite(() => ({}));
});

await describePostgres('Engage syncs to an ordered destination (PostgreSQL)', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  suite(() => ({ 'database-url': db.url }));
});
