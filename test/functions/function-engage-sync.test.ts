import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type ReceivedRequest, type Reply, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** A destination function for Engage: forwards each computed value it is sent, retrying 5xx. */
const ENGAGE_FORWARDER = `
async function onIdentify(event, settings) {
  const personas = event.context && event.context.personas;
  if (!personas) return;
  const key = personas.computation_key;
  const res = await fetch(settings.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ userId: event.userId, key, value: event.traits[key], timestamp: event.timestamp }),
  });
  if (res.status >= 500) throw new RetryError('receiver said ' + res.status);
}
`;

const USERS = 8;
const BATCHES = 12;
const PER_BATCH = 6;

/** What a receiver applied: userId → key → the last value and the timestamp of each sync applied, in order. */
type Applied = Map<string, Map<string, { value: unknown; stamps: string[] }>>;

interface Forwarded {
  userId?: string;
  key?: string;
  value?: unknown;
  timestamp: string;
}

/**
 * Engage's identify syncs reach a source's function destinations as they
 * reach its Webhooks destination: under random delays and 5xx, the
 * function's receiver ends with each profile's values and applies each
 * (user, key)'s syncs in the order they were computed. Each destination has
 * its own chain: one in flight never holds up or drops the other's.
 */
function engageFunctionSuite(name: string, ordering: 'user' | undefined, flags: () => Record<string, string>): void {
  describe(`Engage syncs to a function destination: ${name}`, () => {
    let sy: TestSwitchyard;
    let webhookReceiver: TestReceiver;
    let functionReceiver: TestReceiver;
    let source: { id: string; writeKey: string };
    const seed = Number(process.env['SEED'] ?? 2_500_025);
    const random = seededRandom(seed);
    const appliedByWebhooks: Applied = new Map();
    const appliedByFunction: Applied = new Map();
    const timers = new Set<NodeJS.Timeout>();

    /** Answers 503 a quarter of the time, after a random delay; a 2xx applies the sync when answered. */
    const replier = (applied: Applied, read: (request: ReceivedRequest) => Forwarded | undefined) => (request: ReceivedRequest): Reply => {
      const status = random() < 0.25 ? 503 : 200;
      const delayMs = Math.floor(random() * 40);
      const sync = read(request);
      if (status === 200 && sync?.key !== undefined && sync.userId !== undefined) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          const byKey = applied.get(sync.userId!) ?? new Map<string, { value: unknown; stamps: string[] }>();
          applied.set(sync.userId!, byKey);
          const entry = byKey.get(sync.key!) ?? { value: undefined, stamps: [] };
          byKey.set(sync.key!, { value: sync.value, stamps: [...entry.stamps, sync.timestamp] });
        }, delayMs);
        timers.add(timer);
      }
      return { status, delayMs };
    };

    before(async () => {
      webhookReceiver = await startReceiver();
      functionReceiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '20', 'retry-max-delay-ms': '150', ...flags() });
      source = await sy.createSource('engage-fn');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: webhookReceiver.url }], ...(ordering !== undefined && { ordering }) },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const fn = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'Engage Sink', code: ENGAGE_FORWARDER, settings: { url: functionReceiver.url } });
      assert.equal(fn.status, 201, JSON.stringify(fn.body));
      // A disabled function gets nothing.
      const off = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'Off', code: ENGAGE_FORWARDER, settings: { url: functionReceiver.url }, enabled: false });
      assert.equal(off.status, 201, JSON.stringify(off.body));
      webhookReceiver.reply = replier(appliedByWebhooks, (request) => {
        const sync = JSON.parse(request.body) as { type: string; userId?: string; timestamp: string; traits: Record<string, unknown>; context?: { personas?: { computation_key: string } } };
        const key = sync.type === 'identify' ? sync.context?.personas?.computation_key : undefined;
        return { userId: sync.userId, key, value: key === undefined ? undefined : sync.traits[key], timestamp: sync.timestamp };
      });
      functionReceiver.reply = replier(appliedByFunction, (request) => JSON.parse(request.body) as Forwarded);
    });
    after(async () => {
      for (const timer of timers) clearTimeout(timer);
      await sy?.close();
      await webhookReceiver?.close();
      await functionReceiver?.close();
    });

    it('delivers every computed value to the function, in order, as to the Webhooks destination', { timeout: 150_000 }, async () => {
      const definitions: Array<[string, string, unknown]> = [
        ['/computed-traits', 'orders', { type: 'event_counter', event: 'Order Completed' }],
        ['/audiences', 'repeat_buyers', { performed: { event: 'Order Completed', count: { op: '>=', value: 2 } } }],
        ['/audiences', 'pro_users', { trait: { key: 'plan', op: '=', value: 'pro' } }],
      ];
      for (const [route, key, definition] of definitions) {
        const created = await sy.admin('POST', route, { name: key, key, definition, destinations: [source.id] });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const id = created.body.id as string;
        await eventually(async () => ((await sy.admin('GET', `${route}/${id}`)).body.status === 'live' ? true : undefined), 10_000, `${key} live`);
      }

      let clock = Date.parse('2026-01-01T00:00:00Z');
      for (let b = 0; b < BATCHES; b++) {
        const batch = [];
        for (let i = 0; i < PER_BATCH; i++) {
          const userId = `user-${Math.floor(random() * USERS)}`;
          clock += 1_000;
          const timestamp = new Date(clock).toISOString();
          if (random() < 0.7) batch.push({ type: 'track', userId, event: 'Order Completed', timestamp });
          else batch.push({ type: 'identify', userId, timestamp, traits: { plan: random() < 0.5 ? 'pro' : 'free' } });
        }
        const sent = await sy.send('/v1/batch', source.writeKey, { batch });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 30)));
      }
      await sy.send('/v1/identify', source.writeKey, { userId: 'marker', traits: { plan: 'none' } });
      await eventually(async () => ((await sy.admin('GET', '/profiles/user_id:marker')).status === 200 ? true : undefined), 30_000, 'Engage caught up');

      const profiles = new Map<string, Record<string, unknown>>();
      for (let u = 0; u < USERS; u++) {
        const profile = await sy.admin('GET', `/profiles/user_id:user-${u}`);
        if (profile.status === 404) continue;
        assert.equal(profile.status, 200);
        profiles.set(`user-${u}`, {
          orders: profile.body.computedTraits['orders'],
          repeat_buyers: (profile.body.audiences as string[]).includes('repeat_buyers'),
          pro_users: (profile.body.audiences as string[]).includes('pro_users'),
        });
      }
      assert.ok(profiles.size > 0);

      let quiet = 0;
      await eventually(
        async () => {
          const pending = await sy.admin('GET', '/deliveries?status=pending&limit=1');
          quiet = pending.body.deliveries.length === 0 && timers.size === 0 ? quiet + 1 : 0;
          return quiet >= 10 ? true : undefined;
        },
        90_000,
        'every delivery finished',
      );

      for (const [receiver, applied] of [['function', appliedByFunction], ['webhooks', appliedByWebhooks]] as const) {
        const wrong: string[] = [];
        for (const [userId, values] of profiles) {
          for (const [key, value] of Object.entries(values)) {
            const got = applied.get(userId)?.get(key)?.value;
            // An audience never entered is never sent: nothing means false.
            const expected = value === false ? undefined : value;
            if (JSON.stringify(got === false ? undefined : got) !== JSON.stringify(expected)) wrong.push(`${userId}.${key}: ${receiver} has ${JSON.stringify(got)}, profile ${JSON.stringify(value)}`);
          }
        }
        assert.deepEqual(wrong, [], `seed ${seed}`);
        for (const [userId, byKey] of applied) {
          for (const [key, { stamps }] of byKey) {
            for (let i = 1; i < stamps.length; i++) {
              assert.ok(Date.parse(stamps[i]!) > Date.parse(stamps[i - 1]!), `${receiver} ${userId}.${key}: sync ${i} (${stamps[i]}) applied after a newer one (${stamps[i - 1]}); seed ${seed}`);
            }
          }
        }
      }
      // The disabled function got nothing: every call the receiver got was from the enabled one's deliveries.
      const functions = (await sy.admin('GET', `/sources/${source.id}/destinations/functions`)).body.functions as Array<{ id: string; name: string }>;
      const offId = functions.find((f) => f.name === 'Off')!.id;
      const listed = await sy.admin('GET', `/deliveries?sourceId=${source.id}&limit=500`);
      const ids = new Set((listed.body.deliveries as Array<{ functionId?: string }>).map((d) => d.functionId).filter((id) => id !== undefined));
      assert.ok(!ids.has(offId), 'no delivery to the disabled function');
      assert.equal(ids.size, 1);
    });
  });
}

engageFunctionSuite('sqlite', undefined, () => ({}));

await describePostgres('Engage syncs to a function destination on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  // The Webhooks destination ordered per user here: its order keeps its syncs in order, a chain the function's.
  engageFunctionSuite('postgres, ordered webhooks', 'user', () => ({ 'database-url': db.url }));
});
