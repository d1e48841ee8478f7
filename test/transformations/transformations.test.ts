import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** A short call limit keeps the endless loop's test short; a small heap, the memory bomb's. */
const SANDBOX: Readonly<Record<string, string>> = { 'transform-timeout-ms': '1500', 'transform-memory-mb': '32' };

/** RudderStack's documented example (docs "Transformations" → "Examples"), unchanged. */
export const RUDDERSTACK_EXAMPLE = `export function transformEvent(event, metadata) {
  const email = event.context && event.context.traits && event.context.traits.email;
  if (email) event.context.traits.email = email.toLowerCase();
  const meta = metadata(event);
  event.sourceId = meta.sourceId;
  if (event.event === "Product Viewed") {
    return;
  }
  return event;
}`;

const RESHAPE = `export function transformEvent(event, metadata) {
  log('reshaping', event.event);
  if (event.event === 'Internal Ping') return null;
  if (event.event === 'Split') return [{ ...event, part: 1 }, { ...event, part: 2 }];
  if (event.event === 'Boom') throw new Error('boom: ' + event.properties.why);
  if (event.event === 'Loop') { for (;;) {} }
  if (event.event === 'Bomb') { const hoard = []; for (;;) hoard.push(new Array(100000).fill(Math.random())); }
  event.properties.plan = event.properties.plan?.toUpperCase();
  event.properties.source = metadata(event).sourceName;
  return event;
}`;

function transformationSuite(name: string, flags: () => Record<string, string>): void {
  describe(`transformations (${name})`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ ...SANDBOX, 'allow-private-receivers': 'true', 'retry-base-ms': '20', ...flags() });
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    const bodiesFor = (sourceId: string) => receiver.requests.map((r) => JSON.parse(r.body)).filter((b) => b.properties?.tag === sourceId);
    const track = (writeKey: string, sourceId: string, event: string, extra: Record<string, unknown> = {}) =>
      sy.send('/v1/track', writeKey, { userId: 'u1', event, properties: { tag: sourceId, plan: 'pro', ...extra } });
    const messages = async (sourceId: string) => (await sy.admin('GET', `/sources/${sourceId}/debugger?limit=50`)).body.messages as any[];
    const attach = async (sourceId: string, transformation: unknown, secret = 'tr-secret') => {
      const put = await sy.admin('PUT', `/sources/${sourceId}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: receiver.url }], sharedSecret: secret, transformation },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    };

    it('creates, versions, reads, tests and refuses code over the admin API', async () => {
      const bad = await sy.admin('POST', '/admin/v1/transformations'.replace('/admin/v1', ''), { name: 'bad', code: 'export function transformEvent(e) {\n  return e +;\n}' });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_transformation');
      assert.match(bad.body.error.message, /line 2, column 13/);
      const none = await sy.admin('POST', '/transformations', { name: 'none', code: 'export const x = 1;' });
      assert.equal(none.body.error.code, 'invalid_transformation');

      const created = await sy.admin('POST', '/transformations', { name: 'upper', code: RESHAPE });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.equal(created.body.version, 1);
      const v2 = await sy.admin('PUT', `/transformations/${created.body.id}`, { code: RUDDERSTACK_EXAMPLE, name: 'rudder' });
      assert.equal(v2.status, 200);
      assert.equal(v2.body.version, 2);
      assert.equal((await sy.admin('GET', `/transformations/${created.body.id}`)).body.name, 'rudder');
      assert.equal((await sy.admin('GET', `/transformations/${created.body.id}/versions/1`)).body.code, RESHAPE);
      assert.equal((await sy.admin('GET', `/transformations/${created.body.id}/versions/3`)).status, 404);
      assert.equal((await sy.admin('GET', '/transformations')).body.transformations.length >= 1, true);

      const tested = await sy.admin('POST', '/transformations/test', {
        code: RESHAPE,
        events: [
          { event: 'A', properties: { plan: 'pro' } },
          { event: 'Internal Ping', properties: {} },
          { event: 'Boom', properties: { why: 'x' } },
          { event: 'Split', properties: {} },
        ],
      });
      assert.equal(tested.status, 200, JSON.stringify(tested.body));
      const [reshaped, dropped, failed, split] = tested.body.results;
      assert.equal(reshaped.output.properties.plan, 'PRO');
      assert.deepEqual(reshaped.logs, ['reshaping A']);
      assert.equal(dropped.dropped, true);
      assert.equal(failed.error, 'boom: x (line 5, column 37)');
      assert.equal(split.output.length, 2);
      assert.equal(typeof tested.body.durationMs, 'number');
      const byId = await sy.admin('POST', '/transformations/test', { id: created.body.id, version: 2, events: [{ event: 'Product Viewed', context: {} }] });
      assert.equal(byId.body.results[0].dropped, true);

      const source = await sy.createSource('attach-check');
      const missing = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
        settings: { webhooks: [{ url: receiver.url }], transformation: { id: 'trf_nope' } },
      });
      assert.equal(missing.status, 400);
      await attach(source.id, { id: created.body.id, version: 1 });
      const inUse = await sy.admin('DELETE', `/transformations/${created.body.id}`);
      assert.equal(inUse.status, 409);
      assert.equal(inUse.body.error.code, 'transformation_in_use');
      await sy.admin('DELETE', `/sources/${source.id}/destinations/webhooks`);
      assert.equal((await sy.admin('DELETE', `/transformations/${created.body.id}`)).status, 204);
      assert.equal((await sy.admin('GET', `/transformations/${created.body.id}`)).status, 404);
    });

    it('delivers the transformed bytes (signed), drops, splits, and shows the version and logs in the debugger', async () => {
      const t = await sy.admin('POST', '/transformations', { name: 'reshape', code: RESHAPE });
      const source = await sy.createSource('reshaped');
      await attach(source.id, { id: t.body.id });
      for (const event of ['First', 'Internal Ping', 'Split', 'Last']) assert.equal((await track(source.writeKey, source.id, event)).status, 200);
      const bodies = await eventually(() => {
        const got = bodiesFor(source.id);
        return got.length >= 4 ? got : undefined;
      });
      // Deliveries are sent concurrently (ordered delivery is a separate feature): compare as a set.
      assert.deepEqual(
        bodies.map((b) => `${b.event}${b.part === undefined ? '' : `/${b.part}`}`).sort(),
        ['First', 'Last', 'Split/1', 'Split/2'],
      );
      assert.equal(bodies[0].properties.plan, 'PRO');
      assert.equal(bodies[0].properties.source, 'reshaped');
      const first = receiver.requests.find((r) => JSON.parse(r.body).event === 'First' && JSON.parse(r.body).properties.tag === source.id)!;
      assert.equal(first.headers['x-signature'], createHmac('sha1', 'tr-secret').update(first.body).digest('hex'));

      const listed = await eventually(async () => {
        const all = await messages(source.id);
        return all.length === 4 && all.every((m) => m.transformation !== undefined) ? all : undefined;
      });
      const ping = listed.find((m) => m.message.event === 'Internal Ping')!;
      assert.equal(ping.status, 'filtered');
      assert.equal(ping.reason, 'transformation "reshape" v1 dropped it');
      const last = listed.find((m) => m.message.event === 'Last')!;
      assert.equal(last.status, 'accepted');
      assert.deepEqual(last.transformation, { id: t.body.id, name: 'reshape', version: 1, logs: ['reshaping Last'] });
      // The stored message is the original: only the delivery carries the output.
      assert.equal(last.message.properties.plan, 'pro');
      const metrics = await (await fetch(`${sy.url}/metrics`)).text();
      assert.match(metrics, new RegExp(`switchyard_transformation_runs_total\\{transformation="${t.body.id}",outcome="dropped"\\} 1`));
      assert.match(metrics, /switchyard_transformation_duration_seconds_bucket/);
      const heap = new RegExp(`switchyard_sandbox_heap_bytes\\{kind="transformation",id="${t.body.id}"\\} (\\d+)`).exec(metrics);
      assert.ok(heap !== null && Number(heap[1]) > 0, 'the heap of the transformation\'s isolate is in /metrics');
    });

    it('outputs without a messageId get a webhook-id of their own delivery, not one shared by all', async () => {
      const t = await sy.admin('POST', '/transformations', { name: 'no-id', code: 'export function transformEvent(event) { return { only: event.event, properties: event.properties }; }' });
      const source = await sy.createSource('no-id');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: receiver.url }], transformation: { id: t.body.id }, standardWebhooks: {} },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      for (const event of ['A', 'B']) assert.equal((await track(source.writeKey, source.id, event)).status, 200);
      const requests = await eventually(() => {
        const got = receiver.requests.filter((r) => r.body.includes(`"tag":"${source.id}"`));
        return got.length === 2 ? got : undefined;
      });
      const ids = requests.map((r) => String(r.headers['webhook-id']));
      assert.ok(ids.every((id) => /^sy_d\d+$/.test(id)), ids.join(' '));
      assert.notEqual(ids[0], ids[1]);
    });

    it('a test answers at most 4 MB of output: the events after it are not run, and say so', async () => {
      // Each event: 50 objects of ~30 KB (within the per-object and per-message limits), ~1.5 MB.
      const code = `export function transformEvent(event) { return Array.from({ length: 50 }, (_, i) => ({ i, pad: 'x'.repeat(30000) })); }`;
      const events = Array.from({ length: 5 }, (_, i) => ({ type: 'track', event: `E${i}` }));
      const tested = await sy.admin('POST', '/transformations/test', { code, events });
      assert.equal(tested.status, 200, JSON.stringify(tested.body).slice(0, 300));
      const results = tested.body.results as Array<{ output?: unknown[]; error?: string }>;
      assert.deepEqual(results.map((r) => (r.output === undefined ? 'not run' : r.output.length)), [50, 50, 50, 'not run', 'not run']);
      assert.match(results[3]!.error!, /over 4 MB, the most one test answers/);
    });

    it('sees the message as the destination\'s dropFields filters leave it, and its output is sent as returned', async () => {
      const code = `export function transformEvent(event) {
  log('sees email', String(event.properties.email));
  return { version: 2, only: event.event, seenEmail: event.properties.email ?? null, properties: { tag: event.properties.tag } };
}`;
      const t = await sy.admin('POST', '/transformations', { name: 'as-returned', code });
      assert.equal(t.status, 201, JSON.stringify(t.body));
      const source = await sy.createSource('private');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: receiver.url }], transformation: { id: t.body.id } },
        filters: [{ title: 'no PII', action: { dropFields: ['properties.email'] } }],
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal((await track(source.writeKey, source.id, 'Signed Up', { email: 'secret@example.com' })).status, 200);
      const request = await eventually(() => receiver.requests.find((r) => r.body.includes(`"tag":"${source.id}"`)));
      // Exactly the compact JSON it returned: its own `version`, nothing added, and no email anywhere.
      assert.equal(request.body, JSON.stringify({ version: 2, only: 'Signed Up', seenEmail: null, properties: { tag: source.id } }));
      const [listed] = await eventually(async () => {
        const all = await messages(source.id);
        return all.length === 1 && all[0].transformation !== undefined ? all : undefined;
      });
      assert.deepEqual(listed.transformation.logs, ['sees email undefined']);
      assert.doesNotMatch(JSON.stringify(listed.transformation), /secret@example\.com/);
    });

    it('fails a throw, a timeout and a memory bomb on their own messages; others go on; a retry runs the version attached now', async () => {
      const t = await sy.admin('POST', '/transformations', { name: 'hostile', code: RESHAPE });
      const source = await sy.createSource('hostile');
      const bystander = await sy.createSource('bystander');
      await attach(source.id, { id: t.body.id });
      await attach(bystander.id, { id: (await sy.admin('POST', '/transformations', { name: 'calm', code: RUDDERSTACK_EXAMPLE })).body.id });
      for (const event of ['Boom', 'Loop', 'Bomb', 'After']) await track(source.writeKey, source.id, event, { why: 'bad input' });
      await track(bystander.writeKey, bystander.id, 'Calm');
      await eventually(() => (bodiesFor(source.id).some((b) => b.event === 'After') && bodiesFor(bystander.id).length === 1 ? true : undefined), 20_000);
      const listed = await eventually(async () => {
        const all = await messages(source.id);
        return all.filter((m) => m.status === 'failed').length === 3 ? all : undefined;
      }, 20_000);
      const reason = (event: string) => listed.find((m) => m.message.event === event)!.reason;
      assert.equal(reason('Boom'), 'transformation "hostile" v1: boom: bad input (line 5, column 37)');
      assert.equal(reason('Loop'), 'transformation "hostile" v1: timed out after 1500 ms');
      assert.equal(reason('Bomb'), 'transformation "hostile" v1: ran out of memory (32 MB)');
      assert.equal(bodiesFor(source.id).length, 1);

      // Version 2 no longer throws; retrying the failed deliveries runs it.
      await sy.admin('PUT', `/transformations/${t.body.id}`, { code: RESHAPE.replace("throw new Error('boom: ' + event.properties.why)", "return { ...event, fixed: true }") });
      const retried = await sy.admin('POST', '/deliveries/retry', { sourceId: source.id });
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      const fixed = await eventually(() => bodiesFor(source.id).find((b) => b.event === 'Boom'), 20_000);
      assert.equal(fixed.fixed, true);
      const boom = await eventually(async () => (await messages(source.id)).find((m) => m.message.event === 'Boom' && m.status === 'accepted'), 20_000);
      assert.equal(boom.transformation.version, 2);
    });

    it('a transformation that loops holds up only its own source', async () => {
      const looper = await sy.createSource('looper');
      const other = await sy.createSource('other');
      await attach(looper.id, { id: (await sy.admin('POST', '/transformations', { name: 'loops', code: RESHAPE })).body.id });
      await attach(other.id, { id: (await sy.admin('POST', '/transformations', { name: 'other', code: RESHAPE })).body.id });
      for (let i = 0; i < 4; i++) await track(looper.writeKey, looper.id, 'Loop');
      await track(other.writeKey, other.id, 'Meanwhile');
      await eventually(() => bodiesFor(other.id)[0], 20_000);
      // Each loop takes the 1.5 s timeout: had the other source waited behind them, all four would have failed first.
      const failed = (await messages(looper.id)).filter((m) => m.status === 'failed').length;
      assert.ok(failed < 4, `${failed} of the looping source's messages failed before the other source's was delivered`);
      await eventually(async () => ((await messages(looper.id)).filter((m) => m.status === 'failed').length === 4 ? true : undefined), 20_000);
    });

    it('replays run the version attached now, leaving the message as it was', async () => {
      const t = await sy.admin('POST', '/transformations', { name: 'replayed', code: 'export function transformEvent(e) { return { ...e, v: 1 }; }' });
      const source = await sy.createSource('replayed');
      await attach(source.id, { id: t.body.id });
      const from = new Date(Date.now() - 1000).toISOString();
      await track(source.writeKey, source.id, 'Once');
      await eventually(() => bodiesFor(source.id)[0]);
      await sy.admin('PUT', `/transformations/${t.body.id}`, { code: 'export function transformEvent(e) { return { ...e, v: 2 }; }' });
      const replay = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to: new Date(Date.now() + 1000).toISOString() });
      assert.equal(replay.status, 201, JSON.stringify(replay.body));
      const bodies = await eventually(() => (bodiesFor(source.id).length >= 2 ? bodiesFor(source.id) : undefined), 20_000);
      assert.deepEqual(bodies.map((b) => b.v), [1, 2]);
      const [message] = await messages(source.id);
      assert.equal(message.status, 'accepted');
      assert.equal(message.transformation.version, 1);
    });

    it('runs RudderStack\'s documented example unchanged', async () => {
      const t = await sy.admin('POST', '/transformations', { name: 'rudderstack', code: RUDDERSTACK_EXAMPLE });
      const source = await sy.createSource('rudder');
      await attach(source.id, { id: t.body.id });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Product Viewed', properties: { tag: source.id } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Signed Up', context: { traits: { email: 'Ann@Example.COM' } }, properties: { tag: source.id } });
      const body = await eventually(() => bodiesFor(source.id)[0]);
      assert.equal(body.context.traits.email, 'ann@example.com');
      assert.equal(body.sourceId, source.id);
      const dropped = await eventually(async () => (await messages(source.id)).find((m) => m.status === 'filtered'));
      assert.equal(dropped.message.event, 'Product Viewed');
    });
  });
}

transformationSuite('sqlite', () => ({}));

await describePostgres('transformations on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  transformationSuite('postgres', () => ({ 'database-url': db.url }));
});
