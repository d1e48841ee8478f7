import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

interface Sync {
  type: string;
  userId?: string;
  messageId: string;
  timestamp: string;
  traits: Record<string, unknown>;
  context?: { personas?: { computation_key: string; computation_class: string } };
}

const USERS = 30;
const BATCHES = 80;
const PER_BATCH = 10;
const BIG_SPENDER = 250;
const DEFINITIONS: ReadonlyArray<readonly [route: string, key: string, definition: unknown]> = [
  ['/computed-traits', 'orders', { type: 'event_counter', event: 'Order Completed' }],
  ['/computed-traits', 'revenue', { type: 'aggregation', fn: 'sum', event: 'Order Completed', property: 'revenue' }],
  ['/computed-traits', 'top_revenue', { type: 'aggregation', fn: 'max', event: 'Order Completed', property: 'revenue' }],
  ['/computed-traits', 'last_item', { type: 'last', event: 'Order Completed', property: 'item' }],
  ['/audiences', 'repeat_buyers', { performed: { event: 'Order Completed', count: { op: '>=', value: 2 } } }],
  ['/audiences', 'pro_users', { trait: { key: 'plan', op: '=', value: 'pro' } }],
  ['/audiences', 'big_spenders', { computedTrait: { key: 'revenue', op: '>=', value: BIG_SPENDER } }],
];
const KEYS = DEFINITIONS.map(([, key]) => key);
const AUDIENCES = new Set(DEFINITIONS.filter(([route]) => route === '/audiences').map(([, key]) => key));

type Message =
  | { type: 'track'; userId: string; event: 'Order Completed'; timestamp: string; properties: { revenue: number; item: string } }
  | { type: 'identify'; userId: string; timestamp: string; traits: { plan: string } };

/** What the test sends: a pure function of the seed (a failing SEED replays the same messages). */
interface Data {
  readonly batches: ReadonlyArray<{ readonly messages: readonly Message[]; readonly pauseMs: number }>;
  /** userId → after each of its messages, in order: the batch it was sent in and every key's value then. */
  readonly steps: ReadonlyMap<string, ReadonlyArray<{ readonly batch: number; readonly values: Readonly<Record<string, unknown>> }>>;
}

function makeData(random: () => number): Data {
  const batches: Array<{ messages: Message[]; pauseMs: number }> = [];
  const steps = new Map<string, Array<{ batch: number; values: Record<string, unknown> }>>();
  const state = new Map<string, { orders: number; revenue: number; top: number | undefined; item: string | undefined; plan: string | undefined }>();
  // Fixed, old timestamps, one second apart: a sync stamped with its message's time would be months before it was sent.
  let clock = Date.parse('2026-01-01T00:00:00Z');
  for (let b = 0; b < BATCHES; b++) {
    const messages: Message[] = [];
    for (let i = 0; i < PER_BATCH; i++) {
      const userId = `user-${Math.floor(random() * USERS)}`;
      clock += 1_000;
      const timestamp = new Date(clock).toISOString();
      const s = state.get(userId) ?? { orders: 0, revenue: 0, top: undefined, item: undefined, plan: undefined };
      state.set(userId, s);
      if (random() < 0.7) {
        const properties = { revenue: Math.floor(random() * 100), item: `sku-${Math.floor(random() * 5)}` };
        messages.push({ type: 'track', userId, event: 'Order Completed', timestamp, properties });
        s.orders += 1;
        s.revenue += properties.revenue;
        s.top = Math.max(s.top ?? properties.revenue, properties.revenue);
        s.item = properties.item;
      } else {
        const plan = random() < 0.5 ? 'pro' : 'free';
        messages.push({ type: 'identify', userId, timestamp, traits: { plan } });
        s.plan = plan;
      }
      // The documented values: counts and sums have none before a matching event; an audience not met is false.
      const values: Record<string, unknown> = {
        orders: s.orders === 0 ? undefined : s.orders,
        revenue: s.orders === 0 ? undefined : s.revenue,
        top_revenue: s.top,
        last_item: s.item,
        repeat_buyers: s.orders >= 2,
        pro_users: s.plan === 'pro',
        big_spenders: s.orders > 0 && s.revenue >= BIG_SPENDER,
      };
      const list = steps.get(userId) ?? [];
      steps.set(userId, list);
      list.push({ batch: b, values });
    }
    batches.push({ messages, pauseMs: Math.floor(random() * 30) });
  }
  return { batches, steps };
}

/** Failed checks by kind: the message names how many of each and their first few, where a long diff would be cut. */
class Problems {
  private readonly byKind = new Map<string, string[]>();
  count = 0;

  add(kind: string, text: string): void {
    const list = this.byKind.get(kind) ?? [];
    this.byKind.set(kind, list);
    list.push(text);
    this.count++;
  }

  summary(): string {
    return [...this.byKind].map(([kind, list]) => `${list.length} ${kind}, e.g.\n  ${list.slice(0, 5).join('\n  ')}`).join('\n');
  }
}

/** `switchyard_engage_lag_seconds` on `/metrics`: 0 once Engage has evaluated every stored message. */
async function engageLag(sy: TestSwitchyard): Promise<number | undefined> {
  const text = await (await fetch(`${sy.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('switchyard_engage_lag_seconds '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

/**
 * Engage syncs under random receiver delays and failures: a receiver that
 * applies each sync when it answers it 2xx must end with every user's value
 * of every computed trait and audience equal to the profile's, and apply
 * each (user, key)'s syncs in the order they were computed. Each sync is
 * stamped with the moment its change was computed: not before the message
 * that caused it was sent, distinct per profile and computation, and (a
 * second test) not after it reached the receiver.
 */
function orderSuite(name: string, flags: () => Record<string, string>): void {
  describe(`Engage sync order: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };
    const seed = Number(process.env['SEED'] ?? 2_900_001);
    // Two generators derived from the seed: the data draws from its own, so it is a function of the seed alone;
    // the receiver's answers, asked for in order of arrival (which depends on timing), draw from the other.
    const seeds = seededRandom(seed);
    const dataRandom = seededRandom(Math.floor(seeds() * 2 ** 32));
    const receiverRandom = seededRandom(Math.floor(seeds() * 2 ** 32));
    /** userId → key → the value last applied, and the timestamp of each applied sync in order. */
    const applied = new Map<string, Map<string, { value: unknown; stamps: string[] }>>();
    /** Every sync that reached the receiver (retries included), with when it arrived. */
    const arrivals: Array<{ userId: string; key: string; messageId: string; timestamp: string; value: unknown; arrivedAt: number }> = [];
    let timers = new Set<NodeJS.Timeout>();

    /**
     * Each (user, key)'s distinct syncs (by messageId; a retry must repeat its timestamp and value), in the order of
     * their timestamps, with when each first reached the receiver.
     */
    const distinctSyncs = (): Map<string, Array<{ timestamp: string; value: unknown; firstArrival: number }>> => {
      const byChain = new Map<string, Map<string, { timestamp: string; value: unknown; firstArrival: number }>>();
      for (const arrival of arrivals) {
        const chain = `${arrival.userId}.${arrival.key}`;
        const byId = byChain.get(chain) ?? new Map<string, { timestamp: string; value: unknown; firstArrival: number }>();
        byChain.set(chain, byId);
        const known = byId.get(arrival.messageId);
        if (known === undefined) byId.set(arrival.messageId, { timestamp: arrival.timestamp, value: arrival.value, firstArrival: arrival.arrivedAt });
        else assert.deepEqual([arrival.timestamp, arrival.value], [known.timestamp, known.value], `${chain}: a retry of ${arrival.messageId} changed; seed ${seed}`);
      }
      return new Map([...byChain].map(([chain, byId]) => [chain, [...byId.values()].sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp))]));
    };

    before(async () => {
      receiver = await startReceiver();
      // Short retries, so that a failed sync comes back while newer ones are on their way.
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '20', 'retry-max-delay-ms': '150', ...flags() });
      source = await sy.createSource('shop');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      receiver.reply = (request) => {
        const arrivedAt = Date.now();
        const status = receiverRandom() < 0.25 ? 503 : 200;
        const delayMs = Math.floor(receiverRandom() * 40);
        const sync = JSON.parse(request.body) as Sync;
        const key = sync.context?.personas?.computation_key;
        if (sync.type !== 'identify' || key === undefined || sync.userId === undefined) return { status, delayMs };
        const userId = sync.userId;
        arrivals.push({ userId, key, messageId: sync.messageId, timestamp: sync.timestamp, value: sync.traits[key], arrivedAt });
        if (status === 200) {
          // Applied when answered, as a receiver that processes before it answers would.
          const timer = setTimeout(() => {
            timers.delete(timer);
            const byKey = applied.get(userId) ?? new Map<string, { value: unknown; stamps: string[] }>();
            applied.set(userId, byKey);
            const entry = byKey.get(key) ?? { value: undefined, stamps: [] };
            byKey.set(key, { value: sync.traits[key], stamps: [...entry.stamps, sync.timestamp] });
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
      const data = makeData(dataRandom);
      for (const [route, key, definition] of DEFINITIONS) {
        const created = await sy.admin('POST', route, { name: key, key, definition, destinations: [source.id] });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const id = created.body.id as string;
        await eventually(async () => ((await sy.admin('GET', `${route}/${id}`)).body.status === 'live' ? true : undefined), 10_000, `${key} live`);
      }

      /** The wall clock just before each batch was sent: no sync its messages cause can be stamped earlier. */
      const sentAt: number[] = [];
      for (const { messages, pauseMs } of data.batches) {
        sentAt.push(Date.now());
        const sent = await sy.send('/v1/batch', source.writeKey, { batch: messages });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }

      // `send` waits until each batch is stored; a lag of 0 then means Engage has evaluated all of it, and
      // queued every sync (with its deliveries, in the same commit).
      await eventually(async () => ((await engageLag(sy)) === 0 ? true : undefined), 30_000, 'Engage caught up (lag 0)');
      const profiles = new Map<string, Record<string, unknown>>();
      for (const [userId, steps] of data.steps) {
        const profile = await sy.admin('GET', `/profiles/user_id:${userId}`);
        assert.equal(profile.status, 200, `${userId}: ${JSON.stringify(profile.body)}`);
        const values: Record<string, unknown> = {};
        for (const key of KEYS) values[key] = AUDIENCES.has(key) ? (profile.body.audiences as string[]).includes(key) : profile.body.computedTraits[key];
        assert.deepEqual(values, steps[steps.length - 1]!.values, `${userId}: the profile's values; seed ${seed}`);
        profiles.set(userId, values);
      }
      // Every sync is delivered or failed (pending covers waiting, retrying, parked and in flight) and every 2xx applied:
      // nothing can queue more (no message comes, no window expires).
      await eventually(
        async () => ((await sy.admin('GET', '/deliveries?status=pending&limit=1')).body.deliveries.length === 0 && timers.size === 0 ? true : undefined),
        60_000,
        'every delivery finished and applied',
      );

      const mismatches: string[] = [];
      for (const [userId, values] of profiles) {
        for (const [key, value] of Object.entries(values)) {
          const got = applied.get(userId)?.get(key)?.value;
          // An audience never entered is never sent: the receiver has nothing, which means false.
          if (JSON.stringify(got === false ? undefined : got) !== JSON.stringify(value === false ? undefined : value)) {
            mismatches.push(`${userId}.${key}: receiver ${JSON.stringify(got)}, profile ${JSON.stringify(value)}`);
          }
        }
      }
      assert.deepEqual(mismatches, [], `seed ${seed}`);

      const problems = new Problems();
      // Applied in the order computed.
      for (const [userId, byKey] of applied) {
        for (const [key, { stamps }] of byKey) {
          for (let i = 1; i < stamps.length; i++) {
            if (!(Date.parse(stamps[i]!) > Date.parse(stamps[i - 1]!))) problems.add('applied out of order', `${userId}.${key}: sync ${i} (${stamps[i]}) applied after a newer one (${stamps[i - 1]})`);
          }
        }
      }
      // Each sync's timestamp is the moment its change was computed.
      for (const [chain, ordered] of distinctSyncs()) {
        const userId = chain.slice(0, chain.indexOf('.'));
        const key = chain.slice(chain.indexOf('.') + 1);
        const steps = data.steps.get(userId);
        assert.ok(steps !== undefined, `${chain}: a sync of a user the test never sent`);
        // Distinct per profile and computation: two changes computed for the same (profile, key) never share a timestamp.
        for (let i = 1; i < ordered.length; i++) {
          if (ordered[i]!.timestamp === ordered[i - 1]!.timestamp) problems.add('not distinct', `${chain}: two syncs stamped ${ordered[i]!.timestamp}`);
        }
        // In computation order, each sync carries the value after some prefix of the user's messages, at or after the
        // previous sync's: the earliest such prefix ends with the earliest message that can have caused it, so the
        // sync cannot have been computed before that message was sent.
        let step = 0;
        for (const sync of ordered) {
          while (step < steps.length && JSON.stringify(steps[step]!.values[key]) !== JSON.stringify(sync.value)) step++;
          if (step === steps.length) {
            problems.add('no value of the profile', `${chain}: sync ${JSON.stringify(sync.value)} stamped ${sync.timestamp} is no value the profile had, in this order`);
            break;
          }
          const cause = sentAt[steps[step]!.batch]!;
          if (!(Date.parse(sync.timestamp) >= cause)) problems.add('stamped before its message was sent', `${chain}: ${JSON.stringify(sync.value)} stamped ${sync.timestamp}, before its message was sent at ${new Date(cause).toISOString()}`);
        }
      }
      assert.equal(problems.count, 0, `${problems.summary()}\nseed ${seed}`);
      assert.ok(arrivals.length >= data.steps.size, `only ${arrivals.length} syncs reached the receiver`);
    });

    // The sync timestamps of the test above, against when each sync first reached the receiver.
    it(
      'stamps no sync later than it reaches the receiver',
      () => {
        assert.ok(arrivals.length > 0, 'the test above sent syncs');
        const late = new Problems();
        for (const [chain, ordered] of distinctSyncs()) {
          for (const sync of ordered) {
            if (!(Date.parse(sync.timestamp) <= sync.firstArrival)) late.add('stamped after it reached the receiver', `${chain}: stamped ${sync.timestamp}, after it reached the receiver at ${new Date(sync.firstArrival).toISOString()}`);
          }
        }
        assert.equal(late.count, 0, `${late.summary()}\nseed ${seed}`);
      },
    );
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
