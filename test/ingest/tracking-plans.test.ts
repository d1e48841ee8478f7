import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const ORDER = { type: 'object', properties: { revenue: { type: 'number' }, currency: { type: 'string' } }, required: ['revenue'] };

/** Tracking plans end to end (admin API, processing, receiver, debugger, profiles), on whichever store `flags` choose. */
function planSuite(name: string, flags: () => Record<string, string>): void {
  describe(`tracking plans: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    /** A source delivering to the receiver, with `plan` on it. */
    const sourceWith = async (label: string, plan: unknown) => {
      const source = await sy.createSource(label);
      assert.equal((await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: `${receiver.url}/${label}` }] } })).status, 200);
      const put = await sy.admin('POST', `/sources/${source.id}/tracking-plan`, plan);
      assert.equal(put.status, 201, JSON.stringify(put.body));
      return { ...source, plan: put.body as { id: string; version: number } };
    };
    const received = (label: string) => receiver.requests.filter((r) => r.path === `/hook/${label}`).map((r) => JSON.parse(r.body) as Record<string, any>);
    const debuggerOf = async (id: string) => (await sy.admin('GET', `/sources/${id}/debugger`)).body.messages as { status: string; reason?: string; message: any }[];

    it('stores, versions, reads and deletes a plan; refuses an invalid one naming the event and keyword', async () => {
      const source = await sy.createSource('crud');
      const path = `/sources/${source.id}/tracking-plan`;
      assert.equal((await sy.admin('GET', path)).status, 404);
      const first = await sy.admin('POST', path, { name: 'Web', events: { 'Order Completed': { properties: ORDER } } });
      assert.equal(first.status, 201);
      assert.match(first.body.id, /^tp_/);
      assert.equal(first.body.version, 1);
      assert.deepEqual(first.body.controls, { unplannedEvents: 'allow', violations: 'flag', unplannedProperties: 'allow' });
      const second = await sy.admin('PUT', path, { name: 'Web 2', events: {}, controls: { violations: 'block' } });
      assert.equal(second.status, 200);
      assert.equal(second.body.id, first.body.id, 'a new version of the same plan');
      assert.equal(second.body.version, 2);
      assert.equal((await sy.admin('GET', path)).body.name, 'Web 2');
      const bad = await sy.admin('PUT', path, { events: { Signup: { properties: { properties: { age: { type: 'integer', minimum: 'ten' } } } } } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_tracking_plan');
      assert.match(bad.body.error.message, /Signup.*keyword "minimum"/);
      const badControl = await sy.admin('PUT', path, { events: {}, controls: { unplannedEvents: 'omit' } });
      assert.equal(badControl.body.error.code, 'invalid_tracking_plan');
      assert.equal((await sy.admin('GET', path)).body.version, 2, 'refused plans store nothing');
      assert.equal((await sy.admin('DELETE', path)).status, 204);
      assert.equal((await sy.admin('GET', path)).status, 404);
      assert.equal((await sy.admin('DELETE', path)).status, 404);
      const again = await sy.admin('POST', path, { events: {} });
      assert.equal(again.body.version, 4, 'versions are never reused');
      assert.equal((await sy.admin('POST', '/sources/src_nope/tracking-plan', { events: {} })).status, 404);
    });

    it('refuses a property schema written without "properties" (a keyword ajv would ignore, checking nothing), naming the event and the property', async () => {
      const source = await sy.createSource('misplaced');
      const path = `/sources/${source.id}/tracking-plan`;
      // The schema of the properties written as the properties themselves: saved, it would let `revenue: "ten"` through.
      const flat = await sy.admin('PUT', path, { events: { 'Order Completed': { properties: { revenue: { type: 'number' } } } } });
      assert.equal(flat.status, 400, JSON.stringify(flat.body));
      assert.equal(flat.body.error.code, 'invalid_tracking_plan');
      assert.match(flat.body.error.message, /^event "Order Completed": "revenue" at \/ is not a JSON Schema keyword.*"properties": \{"revenue": …\}.*\(keyword "revenue"\)$/);
      // Deeper too, and in traits.
      const nested = await sy.admin('PUT', path, { identify: { traits: { type: 'object', properties: { address: { type: 'object', city: { type: 'string' } } } } } });
      assert.equal(nested.status, 400);
      assert.match(nested.body.error.message, /^identify traits: "city" at \/properties\/address is not a JSON Schema keyword/);
      assert.equal((await sy.admin('GET', path)).status, 404, 'refused plans store nothing');
      // Annotations (Segment's labels, an id) are not schemas: still allowed.
      const annotated = await sy.admin('PUT', path, { events: { 'Order Completed': { properties: { id: 'oc', labels: { team: 'web' }, type: 'object', properties: { revenue: { type: 'number' } } } } } });
      assert.equal(annotated.status, 200, JSON.stringify(annotated.body));
    });

    it('refuses a plan whose check of one message could cost too much, naming the event and the keyword; a bounded one still flags', async () => {
      const source = await sy.createSource('costly');
      const path = `/sources/${source.id}/tracking-plan`;
      // Pairwise comparison of up to 16,000 items per message: refused.
      const pairwise = await sy.admin('PUT', path, { events: { Tagged: { properties: { properties: { tags: { type: 'array', uniqueItems: true } } } } } });
      assert.equal(pairwise.status, 400);
      assert.equal(pairwise.body.error.code, 'invalid_tracking_plan');
      assert.match(pairwise.body.error.message, /Tagged.*keyword "uniqueItems"/);
      // Hundreds of patterns tried on every key of the properties: refused.
      const patterns = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`^k${i}_`, { type: 'string' }]));
      const keyed = await sy.admin('PUT', path, { events: { Keyed: { properties: { type: 'object', patternProperties: patterns } } } });
      assert.equal(keyed.status, 400);
      assert.match(keyed.body.error.message, /Keyed.*keyword "patternProperties"/);
      // A schema that refers to itself: refused.
      const recursive = await sy.admin('PUT', path, { events: { Tree: { properties: { definitions: { node: { type: 'array', items: { $ref: '#/definitions/node' } } }, $ref: '#/definitions/node' } } } });
      assert.equal(recursive.status, 400);
      assert.match(recursive.body.error.message, /Tree.*keyword "\$ref"/);
      assert.equal((await sy.admin('GET', path)).status, 404, 'refused plans store nothing');

      const bounded = { events: { Tagged: { properties: { type: 'object', properties: { tags: { type: 'array', uniqueItems: true, items: { type: 'string' } }, pairs: { type: 'array', uniqueItems: true, maxItems: 3 } } } } }, controls: { violations: 'flag' } };
      const { writeKey } = await sourceWith('bounded', bounded);
      assert.equal((await sy.send('/v1/track', writeKey, { userId: 'u1', event: 'Tagged', properties: { tags: ['a', 'b', 'a'], pairs: [{ x: 1 }, { x: 1 }] } })).status, 200);
      const [flagged] = await eventually(() => (received('bounded').length === 1 ? received('bounded') : undefined), 30_000, 'the flagged message');
      const violations = flagged!['context'].violationErrors as { type: string; meta: { instancePath: string } }[];
      assert.deepEqual(violations.map((v) => `${v.type}:${v.meta.instancePath}`).sort(), ['Advance-Rules-Violation:/properties/pairs', 'Advance-Rules-Violation:/properties/tags']);
    });

    it('a pattern that backtracks catastrophically holds up neither its source nor any other, in processing or in a preview', async () => {
      // Overlapping alternation under a quantifier: not a nested quantifier, so the save-time check lets it through.
      const plan = { events: { Code: { properties: { type: 'object', properties: { code: { type: 'string', pattern: '^(\\w|\\d)+$' } } } } }, controls: { violations: 'flag' } };
      const source = await sourceWith('redos', plan);
      const other = await sourceWith('redos-other', { events: {} });
      // 2^48 ways to fail: without the linear-time fallback this one message would hold the stage thread for days.
      const poison = `${'1'.repeat(48)}!`;
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Code', properties: { code: poison } })).status, 200);
      assert.equal((await sy.send('/v1/track', other.writeKey, { userId: 'u2', event: 'Anything' })).status, 200);
      const [flagged] = await eventually(() => (received('redos').length === 1 ? received('redos') : undefined), 30_000, 'the poisoned message, checked');
      assert.match(JSON.stringify(flagged!['context'].violationErrors), /must match pattern/);
      await eventually(() => (received('redos-other').length === 1 ? true : undefined), 30_000, 'the other source\'s message');
      // The preview runs the plan on the server's main thread, over the stored message.
      const preview = await sy.admin('POST', `/sources/${source.id}/tracking-plan/preview`, { plan, limit: 5 });
      assert.equal(preview.status, 200, JSON.stringify(preview.body));
      assert.equal((await fetch(`${sy.url}/healthz`)).status, 200);
    });

    it('flag: delivered with context.trackingPlanId, trackingPlanVersion and violationErrors', async () => {
      const source = await sourceWith('flag', { events: { 'Order Completed': { properties: ORDER } }, controls: { violations: 'flag' } });
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order Completed', properties: { revenue: 'ten' } })).status, 200);
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Order Completed', properties: { revenue: 10 } })).status, 200);
      const [bad, good] = await eventually(() => (received('flag').length === 2 ? received('flag') : undefined), 10_000, 'two deliveries');
      assert.equal(bad!['context'].trackingPlanId, source.plan.id);
      assert.equal(bad!['context'].trackingPlanVersion, source.plan.version);
      assert.deepEqual(bad!['context'].violationErrors, [
        { type: 'Datatype-Mismatch', message: 'revenue must be number', property: 'revenue', meta: { instancePath: '/properties/revenue', schemaPath: '#/properties/revenue/type' } },
      ]);
      assert.equal(good!['context']?.violationErrors, undefined, 'a message that keeps to the plan is untouched');
      assert.deepEqual((await debuggerOf(source.id)).map((m) => m.status), ['accepted', 'accepted']);
    });

    it('block: stored as blocked with the violations as the reason, not delivered, not counted by Engage', async () => {
      const source = await sourceWith('block', { events: { 'Order Completed': { properties: ORDER } }, controls: { violations: 'block', unplannedEvents: 'block' } });
      await sy.send('/v1/track', source.writeKey, { userId: 'blocked-1', event: 'Order Completed', properties: {} });
      await sy.send('/v1/track', source.writeKey, { userId: 'blocked-1', event: 'Not Planned' });
      await sy.send('/v1/track', source.writeKey, { userId: 'blocked-1', event: 'Order Completed', properties: { revenue: 5 } });
      await eventually(() => (received('block').length === 1 ? true : undefined), 10_000, 'the valid message delivered');
      const [valid, unplanned, missing] = await debuggerOf(source.id);
      assert.equal(valid!.status, 'accepted');
      assert.equal(unplanned!.status, 'blocked');
      assert.match(unplanned!.reason!, /Unplanned-Event/);
      assert.equal(missing!.status, 'blocked');
      assert.match(missing!.reason!, /Required-Missing.*revenue/);
      // Engage counts the one accepted order only.
      const profile = await eventually(async () => {
        const answer = await sy.admin('GET', '/profiles/user_id:blocked-1');
        return answer.status === 200 ? answer.body : undefined;
      }, 10_000, 'profile');
      assert.equal(JSON.stringify(profile).includes('Not Planned'), false);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(received('block').length, 1, 'blocked messages create no delivery');
    });

    it('omit: violating and unplanned properties and traits reach neither the receiver nor the profile', async () => {
      const source = await sourceWith('omit', {
        events: { 'Order Completed': { properties: ORDER } },
        identify: { traits: { type: 'object', properties: { email: { type: 'string', format: 'email' }, plan: { type: 'string' } } } },
        controls: { violations: 'omit', unplannedProperties: 'omit' },
      });
      await sy.send('/v1/track', source.writeKey, { userId: 'omit-1', event: 'Order Completed', properties: { revenue: 3, currency: 7, card: '4111' } });
      await sy.send('/v1/identify', source.writeKey, { userId: 'omit-1', traits: { email: 'not-an-email', plan: 'pro', ssn: 'x' } });
      const [order, identify] = await eventually(() => (received('omit').length === 2 ? received('omit') : undefined), 10_000, 'two deliveries');
      assert.deepEqual(order!['properties'], { revenue: 3 });
      assert.equal(order!['context'].violationErrors[0].type, 'Datatype-Mismatch');
      assert.deepEqual(identify!['traits'], { plan: 'pro' });
      const profile = await eventually(async () => {
        const answer = await sy.admin('GET', '/profiles/user_id:omit-1');
        return answer.status === 200 && JSON.stringify(answer.body).includes('pro') ? answer.body : undefined;
      }, 10_000, 'profile with traits');
      const text = JSON.stringify(profile);
      assert.equal(text.includes('not-an-email'), false);
      assert.equal(text.includes('ssn'), false);
    });

    it('allow: delivered untouched; a new version applies to the next message', async () => {
      const source = await sourceWith('allow', { events: { A: { properties: { required: ['x'] } } }, controls: { violations: 'allow', unplannedEvents: 'allow' } });
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'A', properties: {} });
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'B' });
      await eventually(() => (received('allow').length === 2 ? true : undefined), 10_000, 'two deliveries');
      assert.ok(received('allow').every((m) => m['context']?.violationErrors === undefined));
      const replaced = await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, { events: { A: {} }, controls: { unplannedEvents: 'flag' } });
      assert.equal(replaced.body.version, 2);
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'B' });
      const third = await eventually(() => received('allow')[2], 10_000, 'third delivery');
      assert.equal(third['context'].trackingPlanVersion, 2);
      assert.equal(third['context'].violationErrors[0].type, 'Unplanned-Event');
    });
  });
}

planSuite('sqlite', () => ({}));

await describePostgres('tracking plans on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  planSuite('postgres', () => ({ 'database-url': db.url }));

  it('a plan set on one node applies to messages another node receives, within seconds', { timeout: 60_000 }, async () => {
    const nodeA = await startTestSwitchyard({ 'database-url': db.url });
    const nodeB = await startTestSwitchyard({ 'database-url': db.url });
    try {
      const source = await nodeA.createSource('two-nodes');
      const put = await nodeA.admin('POST', `/sources/${source.id}/tracking-plan`, { events: { A: {} }, controls: { unplannedEvents: 'block' } });
      assert.equal(put.status, 201);
      let n = 0;
      const blocked = await eventually(async () => {
        await nodeB.send('/v1/track', source.writeKey, { userId: 'u', event: 'B', properties: { n: ++n } });
        const [latest] = (await nodeB.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages as { status: string; message: any }[];
        return latest?.status === 'blocked' ? latest : undefined;
      }, 15_000, 'node B blocking by the new plan');
      assert.equal(blocked.message.context.trackingPlanId, put.body.id);
    } finally {
      await nodeB.close();
      await nodeA.close();
    }
  });
});
