import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describeOnBothStores } from '../helpers/postgres.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * U+0000 in what the admin API takes. PostgreSQL text cannot hold it, so an
 * id from a path or a query (`/sources/%00`, `/deliveries?sourceId=%00`)
 * failed its lookup with 500 there, as did a name or code stored as text.
 * Ids this API makes never hold U+0000: every path and query parameter with
 * one is 400 invalid_request at the door, on both stores, but for the ids a
 * client chose (a profile identifier, the deliveries filters userId and
 * messageId), named as ingest stores them. Names and code are refused the
 * same way, with their route's code.
 */

function describeNulInput(name: string, flags: () => Record<string, string>): void {
  void describe(`U+0000 in admin input: ${name}`, () => {
    let sy: TestSwitchyard;
    let sourceId: string;
    before(async () => {
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
      sourceId = (await sy.createSource('nul-input')).id;
    });
    after(async () => {
      await sy?.close();
    });

    const refused = async (method: string, route: string, field: string, body?: unknown, code = 'invalid_request'): Promise<void> => {
      const answer = await sy.admin(method, route, body);
      const what = `${method} ${route} ${JSON.stringify(body) ?? ''}`;
      assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, code, what);
      assert.ok(answer.body.error.message.startsWith(`${field} must not hold U+0000`), `${what}: ${answer.body.error.message}`);
    };

    void it('answers 400 for U+0000 in any path or query id', async () => {
      const transformation = await sy.admin('POST', '/transformations', { name: 'nul', code: 'export function transformEvent(event) { return event; }' });
      assert.equal(transformation.status, 201, JSON.stringify(transformation.body));
      for (const id of ['%00', 'a%00b']) {
        const routes: Array<[string, string]> = [
          [`/sources/${id}`, 'id'], [`/regulations/${id}`, 'id'], [`/replays/${id}`, 'id'], [`/transformations/${id}`, 'id'],
          [`/audiences/${id}`, 'id'], [`/computed-traits/${id}`, 'id'], [`/audiences/${id}/members`, 'id'], [`/deliveries/${id}`, 'id'],
          [`/sources/${id}/destinations/webhooks`, 'id'], [`/sources/${id}/replays`, 'id'], [`/sources/${id}/schema`, 'id'],
          [`/sources/${id}/tracking-plan`, 'id'], [`/sources/${id}/debugger`, 'id'],
          [`/sources/${sourceId}/destinations/functions/${id}`, 'fid'], [`/sources/${sourceId}/debugger/messages/${id}`, 'seq'],
          [`/transformations/${transformation.body.id}/versions/${id}`, 'version'],
        ];
        for (const [route, field] of routes) await refused('GET', route, field);
        await refused('GET', `/deliveries?sourceId=${id}`, 'sourceId');
        await refused('GET', `/deliveries?beforeId=${id}`, 'beforeId');
        await refused('GET', `/regulations?status=${id}`, 'status');
        await refused('PATCH', `/sources/${id}`, 'id', { name: 'x' });
        await refused('DELETE', `/transformations/${id}`, 'id');
        await refused('POST', `/replays/${id}/cancel`, 'id');
      }
    });

    void it('still finds profiles and deliveries by a userId or messageId holding U+0000, as ingest stores it', async () => {
      const profile = await sy.admin('GET', `/profiles/${encodeURIComponent('user_id:n\u0000')}`);
      assert.equal(profile.status, 404, JSON.stringify(profile.body));
      assert.equal(profile.body.error.code, 'profile_not_found');
      const events = await sy.admin('GET', `/profiles/${encodeURIComponent('user_id:n\u0000')}/events`);
      assert.equal(events.body.error?.code, 'profile_not_found', JSON.stringify(events.body));
      const deliveries = await sy.admin('GET', `/deliveries?userId=${encodeURIComponent('n\u0000')}&messageId=${encodeURIComponent('m\u0000')}`);
      assert.deepEqual([deliveries.status, deliveries.body], [200, { deliveries: [] }]);
    });

    void it('refuses U+0000 in names, code and the ids bodies name', async () => {
      const fn = 'async function onTrack(event, settings) {}';
      const transform = 'export function transformEvent(event) { return event; }';
      await refused('POST', '/sources', 'name', { name: 'n\u0000' });
      await refused('PATCH', `/sources/${sourceId}`, 'name', { name: 'n\u0000' });
      await refused('POST', '/computed-traits', 'name', { name: 'n\u0000', definition: { type: 'event_counter', event: 'Order' } });
      await refused('POST', '/audiences', 'name', { name: 'n\u0000', definition: { trait: { key: 'plan', op: 'exists' } } });
      await refused('POST', '/computed-traits', 'destinations[0]', { name: 'Orders', definition: { type: 'event_counter', event: 'Order' }, destinations: [`${sourceId}\u0000`] });
      await refused('POST', '/transformations', 'name', { name: 'n\u0000', code: transform });
      await refused('POST', '/transformations', 'code', { name: 'n', code: `${transform}//\u0000` }, 'invalid_transformation');
      await refused('POST', '/transformations/test', 'id', { id: 'trf_\u0000', events: [{ type: 'track', event: 'E' }] });
      await refused('POST', `/sources/${sourceId}/destinations/functions`, 'name', { name: 'n\u0000', code: fn });
      await refused('POST', `/sources/${sourceId}/destinations/functions`, 'code', { name: 'n', code: `${fn}//\u0000` }, 'invalid_function');
      await refused('PUT', `/sources/${sourceId}/destinations/webhooks`, 'settings.transformation.id', { settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }], transformation: { id: 'trf_\u0000' } } }, 'invalid_receivers');
      await refused('POST', '/deliveries/retry', 'sourceId', { sourceId: `${sourceId}\u0000` });

      const created = await sy.admin('POST', `/sources/${sourceId}/destinations/functions`, { name: 'fine', code: fn });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      await refused('PUT', `/sources/${sourceId}/destinations/functions/${created.body.id}`, 'name', { name: 'n\u0000' });
      await refused('PUT', `/sources/${sourceId}/destinations/functions/${created.body.id}`, 'code', { code: `${fn}//\u0000` }, 'invalid_function');
      // Nothing of them was stored, and every list still answers.
      for (const route of ['/sources', '/computed-traits', '/audiences', '/transformations', `/sources/${sourceId}/destinations/functions`]) {
        const list = await sy.admin('GET', route);
        assert.equal(list.status, 200, `${route}: ${JSON.stringify(list.body)}`);
        assert.doesNotMatch(JSON.stringify(list.body), /\\u0000/, route);
      }
    });

    void it('stores U+0000 where it lands in JSON: definitions, settings, tracking plans', async () => {
      const audience = await sy.admin('POST', '/audiences', { name: 'Nul values', definition: { trait: { key: 'pl\u0000', op: '=', value: 'x\u0000' } } });
      assert.equal(audience.status, 201, JSON.stringify(audience.body));
      const plan = await sy.admin('PUT', `/sources/${sourceId}/tracking-plan`, { events: { 'E\u0000': { properties: { type: 'object', properties: { 'k\u0000': { type: 'string' } } } } } });
      assert.equal(plan.status, 200, JSON.stringify(plan.body));
      const fn = await sy.admin('POST', `/sources/${sourceId}/destinations/functions`, { name: 'settings', code: 'async function onTrack() {}', settings: { 'k\u0000': 'v\u0000' } });
      assert.equal(fn.status, 201, JSON.stringify(fn.body));
      assert.deepEqual((await sy.admin('GET', `/sources/${sourceId}/destinations/functions/${fn.body.id}`)).body.settings, { 'k\u0000': 'v\u0000' });
    });
  });
}

await describeOnBothStores('U+0000 in admin input', describeNulInput);
