import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describeOnBothStores } from '../helpers/postgres.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * Times and counts the admin API takes. A time past what a JavaScript Date
 * holds (`99999999999999999999`, `8640000000000001`) answered 500 "Invalid
 * time value" where a view turned it into ISO-8601, one past a PostgreSQL
 * bigint (`9223372036854775808`) 500 on PostgreSQL, and a replay stored with
 * such a `from` made its source's replay list answer 500 for good. One rule
 * now: ISO-8601 or epoch ms, 1970-01-01 to 9999-12-31, else 400 naming the
 * field. Counts (`limit`, `minutes`) are decimal digits: `Number()` took
 * `0x10` and `1e1`.
 */

const FORM = /must be an ISO-8601 time \(2026-01-31T12:00:00Z\) or epoch milliseconds, from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59\.999Z/;
const OUT_OF_RANGE = ['99999999999999999999', '8640000000000001', '9223372036854775808', '253402300800000', '+275760-09-13T00:00:00.000Z', '-000001-01-01T00:00:00Z', '1969-12-31T23:59:59Z', 'March 7, 2026', '1e15'];

function describeTimesAndLimits(name: string, flags: () => Record<string, string>): void {
  void describe(`admin times and limits: ${name}`, () => {
    let sy: TestSwitchyard;
    let sourceId: string;
    before(async () => {
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
      sourceId = (await sy.createSource('times')).id;
      const put = await sy.admin('PUT', `/sources/${sourceId}/destinations/webhooks`, { settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    });
    after(async () => {
      await sy?.close();
    });

    const refused = async (method: string, route: string, field: string, body?: unknown): Promise<void> => {
      const answer = await sy.admin(method, route, body);
      const what = `${method} ${route} ${JSON.stringify(body) ?? ''}`;
      assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'invalid_request', what);
      assert.ok(answer.body.error.message.startsWith(`${field} `), `${what} names ${field}: ${answer.body.error.message}`);
    };

    void it('refuses a time out of range with 400 naming the field and the form, in queries and bodies', async () => {
      for (const raw of OUT_OF_RANGE) {
        const q = encodeURIComponent(raw);
        await refused('GET', `/sources/${sourceId}/schema?since=${q}`, 'since');
        await refused('GET', `/sources/${sourceId}/schema?until=${q}`, 'until');
        await refused('GET', `/sources/${sourceId}/tracking-plan/violations?since=${q}`, 'since');
        await refused('POST', `/sources/${sourceId}/tracking-plan/from-schema?since=${q}`, 'since');
        await refused('POST', `/sources/${sourceId}/replays`, 'to', { from: '2026-01-01T00:00:00Z', to: raw });
        await refused('POST', `/sources/${sourceId}/replays`, 'from', { from: raw, to: new Date().toISOString() });
        await refused('POST', '/deliveries/retry', 'since', { since: raw });
      }
      for (const number of [8_640_000_000_000_001, -8_640_000_000_000_001, 9_223_372_036_854_775_808, -1]) {
        await refused('POST', `/sources/${sourceId}/replays`, 'from', { from: number, to: Date.now() });
        await refused('POST', '/deliveries/retry', 'since', { since: number });
      }
      const answer = await sy.admin('GET', `/sources/${sourceId}/schema?since=99999999999999999999`);
      assert.match(answer.body.error.message, FORM);
    });

    void it('stores no replay with a from out of range, so the list still answers', async () => {
      await refused('POST', `/sources/${sourceId}/replays`, 'from', { from: -8_640_000_000_000_001, to: new Date().toISOString() });
      const list = await sy.admin('GET', `/sources/${sourceId}/replays`);
      assert.equal(list.status, 200, JSON.stringify(list.body));
    });

    void it('takes ISO-8601 and epoch ms at both ends of the range', async () => {
      for (const since of ['0', '1970-01-01T00:00:00Z', '2026-01-31', '2026-01-31T12:00:00.123+01:00', '1767225600000']) {
        const answer = await sy.admin('GET', `/sources/${sourceId}/schema?since=${encodeURIComponent(since)}&until=253402300799999`);
        assert.equal(answer.status, 200, `${since}: ${JSON.stringify(answer.body)}`);
        assert.equal(answer.body.to, '9999-12-31T23:59:59.999Z', 'the end of the last day, within the range');
      }
      const latest = await sy.admin('GET', `/sources/${sourceId}/tracking-plan/violations?since=9999-12-31T23:59:59.999Z`);
      assert.equal(latest.status, 200, JSON.stringify(latest.body));
      const retried = await sy.admin('POST', '/deliveries/retry', { since: 0 });
      assert.deepEqual([retried.status, retried.body], [200, { requeued: 0 }]);
      const replay = await sy.admin('POST', `/sources/${sourceId}/replays`, { from: 0, to: new Date().toISOString() });
      assert.equal(replay.status, 201, JSON.stringify(replay.body));
      assert.equal(replay.body.from, '1970-01-01T00:00:00.000Z');
      await sy.admin('POST', `/replays/${replay.body.id}/cancel`);
    });

    void it('refuses counts in any form but decimal digits, in every limit', async () => {
      const computed = await sy.admin('POST', '/audiences', { name: 'Limits', definition: { trait: { key: 'plan', op: 'exists' } } });
      assert.equal(computed.status, 201, JSON.stringify(computed.body));
      const routes: Array<[string, string]> = [
        [`/sources/${sourceId}/debugger?limit=`, 'limit'],
        ['/deliveries?limit=', 'limit'],
        ['/regulations?limit=', 'limit'],
        [`/sources/${sourceId}/replays?limit=`, 'limit'],
        [`/audiences/${computed.body.id}/members?limit=`, 'limit'],
        ['/profiles/user_id:nobody?identifiersLimit=', 'identifiersLimit'],
        ['/profiles/user_id:nobody/events?limit=', 'limit'],
        ['/overview/traffic?minutes=', 'minutes'],
      ];
      for (const [route, field] of routes) {
        for (const odd of ['0x10', '1e1', '0b11', '%2010', '%2B10', '10.0', '0']) await refused('GET', `${route}${odd}`, field);
        const plain = await sy.admin('GET', `${route}10`);
        assert.ok(plain.status === 200 || plain.body.error?.code === 'profile_not_found', `${route}10: ${JSON.stringify(plain.body)}`);
      }
      await refused('POST', `/sources/${sourceId}/tracking-plan/preview`, 'limit', { plan: { events: {} }, limit: '0x10' });
    });
  });
}

await describeOnBothStores('admin times and limits', describeTimesAndLimits);
