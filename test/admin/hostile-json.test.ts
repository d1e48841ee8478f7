/**
 * Admin bodies that no recursive walk may be given: a value nested 5,000 to
 * 100,000 levels deep (it answered 500 "Maximum call stack size exceeded")
 * and a number out of range (`1e400` parses to Infinity and was stored as
 * null). Each is a 400 naming the field, at the door, on every route kind.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/** A JSON array nested `levels` deep, as text (JSON.stringify itself would overflow building it). */
const deep = (levels: number): string => `${'['.repeat(levels)}1${']'.repeat(levels)}`;

interface RouteCase {
  readonly name: string;
  readonly method: string;
  readonly route: () => string;
  /** The body's JSON with `VALUE` where the hostile value goes. */
  readonly body: string;
  readonly field: string;
  readonly code: string;
}

describe('hostile JSON in admin bodies', () => {
  let sy: TestSwitchyard;
  let sourceId = '';
  let audienceId = '';

  before(async () => {
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
    sourceId = (await sy.createSource('hostile')).id;
    const audience = await sy.admin('POST', '/audiences', { name: 'Plans', definition: { trait: { key: 'plan', op: 'exists' } } });
    assert.equal(audience.status, 201, JSON.stringify(audience.body));
    audienceId = audience.body.id;
  });
  after(async () => {
    await sy?.close();
  });

  const cases: RouteCase[] = [
    {
      name: 'an audience trait value',
      method: 'POST',
      route: () => '/audiences',
      body: '{"name":"Deep","definition":{"trait":{"key":"plan","op":"=","value":VALUE}}}',
      field: 'definition.trait.value',
      code: 'invalid_definition',
    },
    {
      name: 'a computed trait where value',
      method: 'POST',
      route: () => '/computed-traits',
      body: '{"name":"Deep sum","definition":{"type":"aggregation","fn":"sum","event":"Spent","property":"revenue","where":[{"property":"a","op":"=","value":VALUE}]}}',
      field: 'definition.where[0].value',
      code: 'invalid_definition',
    },
    {
      name: 'a PATCH of an audience',
      method: 'PATCH',
      route: () => `/audiences/${audienceId}`,
      body: '{"definition":{"performed":{"event":"Buy","where":[{"property":"sku","op":"=","value":VALUE}]}}}',
      field: 'definition.performed.where[0].value',
      code: 'invalid_definition',
    },
    {
      name: 'a destination filter value',
      method: 'PUT',
      route: () => `/sources/${sourceId}/destinations/webhooks`,
      body: '{"enabled":true,"settings":{"webhooks":[{"url":"http://127.0.0.1:9/"}]},"filters":[{"title":"t","if":{"field":"event","op":"=","value":VALUE},"action":"drop"}]}',
      field: 'filters[0].if.value',
      code: 'invalid_filter',
    },
  ];

  const send = async (method: string, route: string, body: string): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${sy.url}/admin/v1${route}`, {
      method,
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body,
    });
    return { status: response.status, body: await response.json() };
  };

  for (const kind of cases) {
    it(`refuses ${kind.name} nested 5,000 and 100,000 levels deep, naming the field`, async () => {
      for (const levels of [5_000, 100_000]) {
        const answer = await send(kind.method, kind.route(), kind.body.replace('VALUE', deep(levels)));
        assert.equal(answer.status, 400, `${levels} levels: ${JSON.stringify(answer.body)}`);
        assert.equal(answer.body.error.code, kind.code);
        assert.ok(answer.body.error.message.startsWith(`${kind.field}[0]`), answer.body.error.message);
        assert.match(answer.body.error.message, /nests deeper than 64 levels/);
      }
    });

    it(`refuses ${kind.name} of 1e400, naming the field`, async () => {
      const answer = await send(kind.method, kind.route(), kind.body.replace('VALUE', '1e400'));
      assert.equal(answer.status, 400, JSON.stringify(answer.body));
      assert.equal(answer.body.error.code, kind.code);
      assert.match(answer.body.error.message, new RegExp(`^${kind.field.replace(/[.[\]]/g, '\\$&')} is a number out of range`));
    });
  }

  it('left nothing behind: the audience is unchanged, no other definition or filter was stored', async () => {
    assert.deepEqual((await sy.admin('GET', `/audiences/${audienceId}`)).body.definition, { trait: { key: 'plan', op: 'exists' } });
    assert.equal((await sy.admin('GET', '/audiences')).body.audiences.length, 1);
    assert.equal((await sy.admin('GET', '/computed-traits')).body.computedTraits.length, 0);
    assert.equal((await sy.admin('GET', `/sources/${sourceId}/destinations/webhooks`)).status, 404);
  });
});
