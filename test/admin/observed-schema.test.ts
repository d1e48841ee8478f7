import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestSwitchyard, eventually, sendWhenKnown, startTestSwitchyard } from '../helpers/switchyard.js';

type Observed = {
  from: string;
  to: string;
  events: { type: string; event: string | null; count: number; in: string | null; paths: { path: string; types: string[]; count: number }[]; pathsTruncated: boolean }[];
  truncated: { events: boolean; unrecordedMessages: number };
  cursor?: string;
  limits: Record<string, number>;
};

const PATHS_PER_PAGE = 2_000;

/** The observed schema end to end (Tracking API in, admin API out), on whichever store `flags` choose. */
function observedSuite(name: string, flags: () => Record<string, string>): void {
  describe(`observed schema: ${name}`, () => {
    let sy: TestSwitchyard;
    before(async () => {
      sy = await startTestSwitchyard(flags());
    });
    after(async () => {
      await sy?.close();
    });

    const schemaOf = async (id: string, query = ''): Promise<Observed> => {
      const answer = await sy.admin('GET', `/sources/${id}/schema${query}`);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer.body as Observed;
    };
    const eventOf = (observed: Observed, type: string, event: string | null) => observed.events.find((e) => e.type === type && e.event === event);
    const pathsOf = (observed: Observed) => observed.events.reduce((sum, e) => sum + e.paths.length, 0);
    /** Every page from the first, each checked against the bounds; their events in one answer. */
    const walk = async (id: string, query = '', limit = 100): Promise<{ all: Observed; pages: Observed[] }> => {
      const pages: Observed[] = [];
      for (let cursor: string | undefined = ''; cursor !== undefined; cursor = pages[pages.length - 1]!.cursor) {
        const page = await schemaOf(id, `?limit=${limit}${cursor === '' ? '' : `&cursor=${cursor}`}${query}`);
        assert.ok(page.events.length >= 1 || pages.length === 0, 'a page that says more holds an event');
        assert.ok(page.events.length <= limit, `${page.events.length} events on a page of ${limit}`);
        assert.ok(pathsOf(page) <= PATHS_PER_PAGE, `${pathsOf(page)} paths on a page`);
        assert.equal(page.truncated.events, page.cursor !== undefined || page.truncated.unrecordedMessages > 0);
        pages.push(page);
        assert.ok(pages.length <= 10_000);
      }
      return { all: { ...pages[0]!, events: pages.flatMap((p) => p.events), cursor: undefined }, pages };
    };

    it('lists each call type and event with its count, and each path with the JSON types seen and a count', async () => {
      const source = await sy.createSource('shapes');
      const batch = [
        { type: 'track', userId: 'u1', event: 'Order Completed', properties: { revenue: 10, currency: 'EUR', items: [{ sku: 'a', qty: 1 }, { sku: 'b', price: 2.5 }] } },
        { type: 'track', userId: 'u2', event: 'Order Completed', properties: { revenue: 12.5, coupon: null, 'dotted.key': true } },
        { type: 'track', userId: 'u3', event: 'Signed Up', properties: { plan: { name: 'pro', seats: 3 } } },
        { type: 'identify', userId: 'u1', traits: { email: 'a@example.com', age: 30 } },
        { type: 'identify', userId: 'u2', traits: { email: 'b@example.com' } },
        { type: 'page', userId: 'u1', name: 'Home', properties: { path: '/' } },
      ];
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u4', event: 'Order Completed', properties: { revenue: 'ten' } })).status, 200);
      // Invalid calls are not observed.
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: [{ type: 'track', properties: { nobody: 1 } }] })).status, 200);

      const observed = await schemaOf(source.id);
      assert.equal(observed.truncated.events, false);
      const order = eventOf(observed, 'track', 'Order Completed')!;
      assert.equal(order.count, 3);
      assert.equal(order.in, 'properties');
      assert.equal(order.pathsTruncated, false);
      assert.deepEqual(order.paths, [
        { path: 'coupon', types: ['null'], count: 1 },
        { path: 'currency', types: ['string'], count: 1 },
        { path: 'dotted\\.key', types: ['boolean'], count: 1 },
        { path: 'items', types: ['array'], count: 1 },
        { path: 'items[]', types: ['object'], count: 1 },
        { path: 'items[].price', types: ['number'], count: 1 },
        { path: 'items[].qty', types: ['integer'], count: 1 },
        { path: 'items[].sku', types: ['string'], count: 1 },
        { path: 'revenue', types: ['string', 'integer', 'number'], count: 3 },
      ]);
      assert.deepEqual(eventOf(observed, 'track', 'Signed Up')!.paths.map((p) => `${p.path}:${p.types.join('|')}`), ['plan:object', 'plan.name:string', 'plan.seats:integer']);
      const identify = eventOf(observed, 'identify', null)!;
      assert.equal(identify.count, 2);
      assert.equal(identify.in, 'traits');
      assert.deepEqual(identify.paths, [
        { path: 'age', types: ['integer'], count: 1 },
        { path: 'email', types: ['string'], count: 2 },
      ]);
      assert.equal(eventOf(observed, 'page', null)!.count, 1);
      assert.equal(observed.events.some((e) => e.paths.some((p) => p.path === 'nobody')), false, 'a rejected call is not observed');
      assert.equal(observed.events[0]!.event, 'Order Completed', 'biggest count first');
    });

    it('observes a message sent again with its messageId once, in one batch or in a later request', async () => {
      const source = await sy.createSource('retries');
      const call = { type: 'track', userId: 'u1', messageId: 'retried-1', event: 'Retried', properties: { attempt: 1 } };
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: [call, call, { ...call, messageId: 'other-1' }] })).status, 200);
      assert.equal((await sy.send('/v1/track', source.writeKey, call)).status, 200);
      const retried = eventOf(await schemaOf(source.id), 'track', 'Retried')!;
      assert.equal(retried.count, 2, 'two distinct messageIds, the duplicates not counted');
      assert.deepEqual(retried.paths, [{ path: 'attempt', types: ['integer'], count: 2 }]);
    });

    it('filters by period (UTC days), and refuses a period that ends before it starts', async () => {
      const source = await sy.createSource('period');
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Now', properties: { a: 1 } });
      const day = 86_400_000;
      const today = await schemaOf(source.id);
      assert.equal(eventOf(today, 'track', 'Now')?.count, 1);
      const before = await schemaOf(source.id, `?since=${new Date(Date.now() - 10 * day).toISOString()}&until=${new Date(Date.now() - 2 * day).toISOString()}`);
      assert.deepEqual(before.events, [], 'nothing was received in that period');
      const later = await schemaOf(source.id, `?since=${Date.now() + 2 * day}&until=${Date.now() + 3 * day}`);
      assert.deepEqual(later.events, []);
      assert.equal(Date.parse(later.from) % day, 0, 'from is the start of a UTC day');
      const wrong = await sy.admin('GET', `/sources/${source.id}/schema?since=${Date.now() + 2 * day}`);
      assert.equal(wrong.status, 400);
      assert.equal(wrong.body.error.code, 'invalid_request');
      assert.equal((await sy.admin('GET', `/sources/${source.id}/schema?since=yesterday`)).status, 400);
      assert.equal((await sy.admin('GET', '/sources/src_nope/schema')).status, 404);
      // The pruner deletes days before its bound (30 days back; here, everything up to tomorrow).
      await sy.store.pruneObservations(Date.now() - 40 * day, Date.now() - 40 * day);
      assert.equal(eventOf(await schemaOf(source.id), 'track', 'Now')?.count, 1, 'today is kept');
      assert.ok((await sy.store.pruneObservations(Date.now() + day, Date.now() + day)) > 0);
      assert.deepEqual((await schemaOf(source.id)).events, []);
    });

    it('records at most 2,000 event names per source and day and 200 paths per event, and says so', { timeout: 60_000 }, async () => {
      const source = await sy.createSource('caps');
      // One batch: the 2,001 names are decided within one processing batch (biggest counts first).
      const names = Array.from({ length: 2_001 }, (_, i) => ({ type: 'track', userId: 'u', event: `E${i}` }));
      names.push({ type: 'track', userId: 'u', event: 'E0' });
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: names })).status, 200);
      let observed = await schemaOf(source.id);
      assert.equal(observed.events.length, 100, 'a page of 100 by default');
      assert.deepEqual(observed.truncated, { events: true, unrecordedMessages: 1 });
      assert.equal(eventOf(observed, 'track', 'E0')!.count, 2);
      assert.equal((await walk(source.id, '', 1_000)).all.events.length, 2_000);
      // A name already recorded keeps counting; a new one (a batch later) is not recorded.
      await sy.send('/v1/batch', source.writeKey, { batch: [{ type: 'track', userId: 'u', event: 'E0' }, { type: 'track', userId: 'u', event: 'Brand New' }] });
      observed = (await walk(source.id, '', 1_000)).all;
      assert.equal(eventOf(observed, 'track', 'E0')!.count, 3);
      assert.equal(eventOf(observed, 'track', 'Brand New'), undefined);
      assert.deepEqual(observed.truncated, { events: true, unrecordedMessages: 2 });

      const wide = await sy.createSource('wide');
      const props = (from: number) => Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`p${from + i}`, i]));
      await sy.send('/v1/batch', wide.writeKey, { batch: [0, 100].map((from) => ({ type: 'track', userId: 'u', event: 'Wide', properties: props(from) })) });
      observed = await schemaOf(wide.id);
      assert.equal(eventOf(observed, 'track', 'Wide')!.paths.length, 200);
      assert.equal(eventOf(observed, 'track', 'Wide')!.pathsTruncated, false, 'exactly at the cap');
      await sy.send('/v1/track', wide.writeKey, { userId: 'u', event: 'Wide', properties: { p0: 1, extra: 'x' } });
      observed = await schemaOf(wide.id);
      const event = eventOf(observed, 'track', 'Wide')!;
      assert.equal(event.paths.length, 200);
      assert.equal(event.pathsTruncated, true);
      assert.equal(event.paths.some((p) => p.path === 'extra'), false);
      assert.equal(event.paths.find((p) => p.path === 'p0')!.count, 2, 'a recorded path keeps counting');
      // One message walks at most 200 paths: the event says a bound cut it.
      await sy.send('/v1/track', wide.writeKey, { userId: 'u', event: 'Very Wide', properties: Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`q${i}`, 1])) });
      const veryWide = eventOf(await schemaOf(wide.id), 'track', 'Very Wide')!;
      assert.equal(veryWide.paths.length, 200);
      assert.equal(veryWide.pathsTruncated, true);
    });

    it('answers a bounded page (events and paths) when the store holds more, and its cursors walk every event exactly once', { timeout: 60_000 }, async () => {
      const source = await sy.createSource('paged');
      const wide = (i: number) => Object.fromEntries(Array.from({ length: 200 }, (_, k) => [`w${i}_${k}`, k]));
      // 15 events of 200 paths (3,000, past a page's 2,000) and 40 small ones, with tied counts.
      const batch = [
        ...Array.from({ length: 15 }, (_, i) => ({ type: 'track', userId: 'u', event: `Wide ${i}`, properties: wide(i) })),
        ...Array.from({ length: 40 }, (_, i) => Array.from({ length: 1 + (i % 4) }, () => ({ type: 'track', userId: 'u', event: `Small ${i}`, properties: { a: i } }))).flat(),
        { type: 'identify', userId: 'u', traits: { email: 'a@example.com' } },
      ];
      assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
      const expected = [
        ...Array.from({ length: 15 }, (_, i) => `track/Wide ${i}/1`),
        ...Array.from({ length: 40 }, (_, i) => `track/Small ${i}/${1 + (i % 4)}`),
        'identify/null/1',
      ].sort();

      const first = await schemaOf(source.id);
      assert.ok(first.cursor !== undefined, 'cut by the path budget though under the event limit');
      assert.equal(first.truncated.events, true);
      assert.ok(pathsOf(first) <= PATHS_PER_PAGE && pathsOf(first) > 0);
      assert.equal(first.limits['pathsPerPage'], PATHS_PER_PAGE);
      for (const limit of [1, 7, 100]) {
        const { all, pages } = await walk(source.id, '', limit);
        const listed = all.events.map((e) => `${e.type}/${e.event}/${e.count}`);
        assert.deepEqual([...listed].sort(), expected, `limit ${limit}: each event exactly once`);
        assert.ok(all.events.every((e, i) => i === 0 || all.events[i - 1]!.count >= e.count), 'biggest count first, across pages');
        assert.equal(pages[pages.length - 1]!.truncated.events, false, 'the last page says nothing more');
        for (const e of all.events) assert.equal(e.paths.length, e.event?.startsWith('Wide') === true ? 200 : 1);
        if (limit === 100) assert.ok(pages.length >= 2, 'the path budget cut a page');
      }
      const bad = await sy.admin('GET', `/sources/${source.id}/schema?cursor=not-a-cursor!`);
      assert.equal(bad.status, 400);
      assert.match(bad.body.error.message, /cursor/);
      assert.equal((await sy.admin('GET', `/sources/${source.id}/schema?cursor=${Buffer.from('[1,2]').toString('base64url')}`)).status, 400);
      for (const limit of ['0', '1001', '1e2']) assert.equal((await sy.admin('GET', `/sources/${source.id}/schema?limit=${limit}`)).status, 400, `limit=${limit}`);
    });

    it('counts whole UTC days within the times the API takes: to is at most 9999-12-31T23:59:59.999Z, the default since not before 1970', async () => {
      const source = await sy.createSource('edges');
      for (const until of ['9999-12-31T00:00:00Z', '253402300799999']) {
        const last = await schemaOf(source.id, `?until=${until}`);
        assert.deepEqual([last.from, last.to], ['9999-12-24T00:00:00.000Z', '9999-12-31T23:59:59.999Z'], 'not +010000-01-01');
      }
      const drafted = await sy.admin('POST', `/sources/${source.id}/tracking-plan/from-schema?since=9999-12-31&until=9999-12-31T23:59:59.999Z`);
      assert.equal(drafted.status, 200, JSON.stringify(drafted.body));
      assert.equal(drafted.body.name, 'Drafted from 9999-12-31 to 9999-12-31');
      const before = await schemaOf(source.id, '?since=9999-12-30T00:00:00Z&until=9999-12-30T23:59:59.999Z');
      assert.deepEqual([before.from, before.to], ['9999-12-30T00:00:00.000Z', '9999-12-31T00:00:00.000Z']);
      const early = await schemaOf(source.id, '?until=1000');
      assert.deepEqual([early.from, early.to], ['1970-01-01T00:00:00.000Z', '1970-01-02T00:00:00.000Z'], 'the default since is not before 1970');
    });

    it('drafts a plan from the most frequent events within its path budget, and says when it left events out', { timeout: 60_000 }, async () => {
      const source = await sy.createSource('draft-bounded');
      const wide = (i: number) => Object.fromEntries(Array.from({ length: 200 }, (_, k) => [`p${k}`, i]));
      // 12 events of 200 paths: 2,400, past a draft's 2,000. Event i is sent 12 - i times.
      for (let i = 0; i < 12; i++) {
        const batch = Array.from({ length: 12 - i }, () => ({ type: 'track', userId: 'u', event: `E${i}`, properties: wide(i) }));
        assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
      }
      const drafted = await sy.admin('POST', `/sources/${source.id}/tracking-plan/from-schema`);
      assert.equal(drafted.status, 200, JSON.stringify(drafted.body).slice(0, 300));
      assert.deepEqual(Object.keys(drafted.body.events), Array.from({ length: 10 }, (_, i) => `E${i}`), 'the 10 most frequent: 2,000 paths');
      assert.match(drafted.body.name, /the 10 most frequent events only/);
    });

    it('drafts a number seen only whole as "number", so a fraction sent later is no violation', async () => {
      const source = await sy.createSource('draft-whole');
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order Completed', properties: { revenue: 30, items: [{ qty: 2 }] } });
      await eventually(async () => ((await schemaOf(source.id)).events.length === 1 ? true : undefined), 30_000, 'the observed event');
      const drafted = await sy.admin('POST', `/sources/${source.id}/tracking-plan/from-schema`);
      assert.equal(drafted.status, 200, JSON.stringify(drafted.body));
      const order = drafted.body.events['Order Completed'].properties;
      assert.equal(order.properties.revenue.type, 'number', 'JSON does not tell 30 from 30.0');
      assert.equal(order.properties.items.items.properties.qty.type, 'number');
      assert.equal((await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, drafted.body)).status, 200);
      await sy.send('/v1/track', source.writeKey, { userId: 'u2', event: 'Order Completed', properties: { revenue: 29.99, items: [{ qty: 1.5 }] } });
      const [latest] = await eventually(async () => {
        const messages = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages as { message: any }[];
        return messages[0]?.message.properties.revenue === 29.99 ? messages : undefined;
      }, 30_000, 'the second order');
      assert.equal(latest!.message.context?.violationErrors, undefined, JSON.stringify(latest!.message.context));
    });

    it('drafts a plan from it that, once put, accepts the observed events and flags a new property', async () => {
      const source = await sy.createSource('draft');
      await sy.send('/v1/batch', source.writeKey, {
        batch: [
          { type: 'track', userId: 'u1', event: 'Order Completed', properties: { revenue: 10, items: [{ sku: 'a' }] } },
          { type: 'track', userId: 'u2', event: 'Order Completed', properties: { revenue: 12.5, coupon: 'X' } },
          { type: 'identify', userId: 'u1', traits: { email: 'a@example.com' } },
        ],
      });
      const drafted = await sy.admin('POST', `/sources/${source.id}/tracking-plan/from-schema`);
      assert.equal(drafted.status, 200, JSON.stringify(drafted.body));
      const order = drafted.body.events['Order Completed'].properties;
      assert.equal(order.type, 'object');
      assert.deepEqual(order.required, ['revenue'], 'only what every message had');
      assert.equal(order.properties.revenue.type, 'number');
      assert.equal(order.properties.items.items.properties.sku.type, 'string');
      assert.equal(order.additionalProperties, false);
      assert.equal(drafted.body.identify.traits.properties.email.type, 'string');
      assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).status, 404, 'a draft is not stored');

      const put = await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, drafted.body);
      assert.equal(put.status, 200, JSON.stringify(put.body));
      await sy.send('/v1/track', source.writeKey, { userId: 'u3', event: 'Order Completed', properties: { revenue: 3, coupon: 'Y', items: [{ sku: 'c' }] } });
      await sy.send('/v1/identify', source.writeKey, { userId: 'u3', traits: { email: 'c@example.com' } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u3', event: 'Order Completed', properties: { revenue: 4, gift: true } });
      const messages = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=3`)).body.messages as { status: string; message: any }[];
      const [withNew, identify, planned] = messages;
      assert.equal(planned!.message.context?.violationErrors, undefined, 'an observed shape keeps to the draft');
      assert.equal(identify!.message.context?.violationErrors, undefined);
      assert.equal(withNew!.status, 'accepted');
      assert.deepEqual(
        withNew!.message.context.violationErrors.map((v: { type: string; property: string }) => [v.type, v.property]),
        [['Additional-Properties', 'gift']],
      );
    });
  });
}

observedSuite('sqlite', () => ({}));

await describePostgres('observed schema on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  observedSuite('postgres', () => ({ 'database-url': db.url }));

  it('two nodes processing at once add up into the same rows', { timeout: 60_000 }, async () => {
    const nodeA = await startTestSwitchyard({ 'database-url': db.url });
    const nodeB = await startTestSwitchyard({ 'database-url': db.url });
    try {
      const source = await nodeA.createSource('two-nodes');
      const batch = (n: number) => ({ batch: Array.from({ length: 50 }, (_, i) => ({ type: 'track', userId: `u${n}-${i}`, event: i % 2 === 0 ? 'Even' : 'Odd', properties: { n, [`k${i % 5}`]: i } })) });
      const sends = Array.from({ length: 10 }, (_, n) => sendWhenKnown(n % 2 === 0 ? nodeA : nodeB, '/v1/batch', source.writeKey, batch(n)));
      assert.deepEqual((await Promise.all(sends)).map((answer) => answer.status), Array(10).fill(200));
      await Promise.all([nodeA.processed(), nodeB.processed()]);
      const observed = (await nodeB.admin('GET', `/sources/${source.id}/schema`)).body as Observed;
      assert.deepEqual(observed.events.map((e) => [e.event, e.count]).sort(), [['Even', 250], ['Odd', 250]]);
      const even = observed.events.find((e) => e.event === 'Even')!;
      assert.equal(even.paths.find((p) => p.path === 'n')!.count, 250);
      assert.deepEqual(even.paths.map((p) => p.path), ['k0', 'k1', 'k2', 'k3', 'k4', 'n']);
    } finally {
      await nodeB.close();
      await nodeA.close();
    }
  });
});
