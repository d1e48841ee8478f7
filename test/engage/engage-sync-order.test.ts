import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Sync {
  type: string;
  userId?: string;
  timestamp: string;
  traits: Record<string, unknown>;
  context?: { personas?: { computation_key: string; computation_class: string } };
}

const USERS = 12;
const BATCHES = 30;
const PER_BATCH = 8;
const TRAITS = ['orders', 'revenue', 'last_item'];
const AUDIENCES = ['repeat_buyers', 'pro_users'];

/**
 * Engage syncs under random receiver delays and failures: a receiver that
 * applies each sync when it answers it 2xx must end with every user's value
 * of every computed trait and audience equal to the profile's, and apply
 * each (user, key)'s syncs in the order they were computed (timestamps
 * strictly increasing).
 */
function orderSuite(name: string, flags: () => Record<string, string>): void {
  describe(`Engage sync order: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };
    const seed = Number(process.env['SEED'] ?? 2_900_001);
    // The data is a function of the seed alone; the receiver's answers, asked for in arrival order, draw from their own generator.
    const random = seededRandom(seed);
    const receiverRandom = seededRandom(seed + 1);
    /** userId → key → the value last applied, and the timestamp of each applied sync in order, with when it was applied. */
    const applied = new Map<string, Map<string, { value: unknown; stamps: string[]; appliedAt: number[] }>>();
    let timers = new Set<NodeJS.Timeout>();

    before(async () => {
      receiver = await startReceiver();
      // Short retries, so that a failed sync comes back while newer ones are on their way.
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '20', 'retry-max-delay-ms': '150', ...flags() });
      source = await sy.createSource('shop');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      receiver.reply = (request) => {
        const status = receiverRandom() < 0.25 ? 503 : 200;
        const delayMs = Math.floor(receiverRandom() * 40);
        const sync = JSON.parse(request.body) as Sync;
        const key = sync.context?.personas?.computation_key;
        if (status === 200 && sync.type === 'identify' && key !== undefined && sync.userId !== undefined) {
          // Applied when answered, as a receiver that processes before it answers would.
          const timer = setTimeout(() => {
            timers.delete(timer);
            const byKey = applied.get(sync.userId!) ?? new Map<string, { value: unknown; stamps: string[]; appliedAt: number[] }>();
            applied.set(sync.userId!, byKey);
            const entry = byKey.get(key) ?? { value: undefined, stamps: [], appliedAt: [] };
            byKey.set(key, { value: sync.traits[key], stamps: [...entry.stamps, sync.timestamp], appliedAt: [...entry.appliedAt, Date.now()] });
          }, delayMs);
          timers.add(timer);
        }
        return { status, delayMs };
      };
    });
    after(async () => {
      for (const timer of timers) clearTimeout(timer);
      timers = new Set();
      await sy?.close();
      await receiver?.close();
    });

    it('leaves every receiver with each profile value, applied in order, despite delays and 5xx', { timeout: 120_000 }, async () => {
      const definitions: Array<[string, string, unknown]> = [
        ['/computed-traits', 'orders', { type: 'event_counter', event: 'Order Completed' }],
        ['/computed-traits', 'revenue', { type: 'aggregation', fn: 'sum', event: 'Order Completed', property: 'revenue' }],
        ['/computed-traits', 'last_item', { type: 'last', event: 'Order Completed', property: 'item' }],
        ['/audiences', 'repeat_buyers', { performed: { event: 'Order Completed', count: { op: '>=', value: 2 } } }],
        ['/audiences', 'pro_users', { trait: { key: 'plan', op: '=', value: 'pro' } }],
      ];
      for (const [route, key, definition] of definitions) {
        const created = await sy.admin('POST', route, { name: key, key, definition, destinations: [source.id] });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const id = created.body.id as string;
        await eventually(async () => ((await sy.admin('GET', `${route}/${id}`)).body.status === 'live' ? true : undefined), 10_000, `${key} live`);
      }

      // Syncs are stamped when computed: after this, whatever the messages' own (much older) timestamps say.
      const sendingFrom = Date.now();
      let clock = Date.parse('2026-01-01T00:00:00Z');
      for (let b = 0; b < BATCHES; b++) {
        const batch = [];
        for (let i = 0; i < PER_BATCH; i++) {
          const userId = `user-${Math.floor(random() * USERS)}`;
          clock += 1_000;
          const timestamp = new Date(clock).toISOString();
          if (random() < 0.7) {
            batch.push({ type: 'track', userId, event: 'Order Completed', timestamp, properties: { revenue: Math.floor(random() * 100), item: `sku-${Math.floor(random() * 5)}` } });
          } else {
            batch.push({ type: 'identify', userId, timestamp, traits: { plan: random() < 0.5 ? 'pro' : 'free' } });
          }
        }
        const sent = await sy.send('/v1/batch', source.writeKey, { batch });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 30)));
      }

      // A later message of another user: once its profile exists, Engage has applied everything before it.
      await sy.send('/v1/identify', source.writeKey, { userId: 'marker', traits: { plan: 'none' } });
      await eventually(async () => ((await sy.admin('GET', '/profiles/user_id:marker')).status === 200 ? true : undefined), 20_000, 'Engage caught up');

      const profiles = new Map<string, Record<string, unknown>>();
      for (let u = 0; u < USERS; u++) {
        const profile = await sy.admin('GET', `/profiles/user_id:user-${u}`);
        if (profile.status === 404) continue;
        assert.equal(profile.status, 200);
        const values: Record<string, unknown> = {};
        for (const key of TRAITS) values[key] = profile.body.computedTraits[key];
        for (const key of AUDIENCES) values[key] = (profile.body.audiences as string[]).includes(key);
        profiles.set(`user-${u}`, values);
      }
      const mismatches = (): string[] => {
        const wrong: string[] = [];
        for (const [userId, values] of profiles) {
          for (const [key, value] of Object.entries(values)) {
            const got = applied.get(userId)?.get(key)?.value;
            // An audience never entered is never sent: the receiver has nothing, which means false.
            const expected = value === false ? undefined : value;
            const last = got === false ? undefined : got;
            if (JSON.stringify(last) !== JSON.stringify(expected)) wrong.push(`${userId}.${key}: receiver ${JSON.stringify(got)}, profile ${JSON.stringify(value)}`);
          }
        }
        return wrong;
      };
      // Everything settles: no delivery pending and no answer on its way, twice in a row (a parked sync is pending too).
      let quiet = 0;
      await eventually(
        async () => {
          const pending = await sy.admin('GET', '/deliveries?status=pending&limit=1');
          quiet = pending.body.deliveries.length === 0 && timers.size === 0 ? quiet + 1 : 0;
          return quiet >= 10 ? true : undefined;
        },
        60_000,
        'every delivery finished',
      );
      assert.deepEqual(mismatches(), [], `seed ${seed}`);
      for (const [userId, byKey] of applied) {
        for (const [key, { stamps, appliedAt }] of byKey) {
          stamps.forEach((stamp, i) => {
            const at = Date.parse(stamp);
            assert.ok(at >= sendingFrom && at <= appliedAt[i]!, `${userId}.${key}: sync ${i} stamped ${stamp}, not when it was computed (sent from ${new Date(sendingFrom).toISOString()}, applied ${new Date(appliedAt[i]!).toISOString()}); seed ${seed}`);
          });
          for (let i = 1; i < stamps.length; i++) {
            assert.ok(Date.parse(stamps[i]!) > Date.parse(stamps[i - 1]!), `${userId}.${key}: sync ${i} (${stamps[i]}) applied after a newer one (${stamps[i - 1]}); seed ${seed}`);
          }
        }
      }
    });
  });
}

orderSuite('sqlite', () => ({}));

await describePostgres('Engage sync order on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  orderSuite('postgres', () => ({ 'database-url': db.url }));
});
