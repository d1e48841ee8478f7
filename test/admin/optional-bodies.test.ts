import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

describe('admin POSTs whose body fields are all optional take no body at all', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
  });
  after(async () => {
    await sy?.close();
  });

  /** As `curl -X POST <url>` sends it: no body, no Content-Type. */
  const postNothing = async (path: string): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${sy.url}/admin/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
    return { status: response.status, body: await response.json() };
  };

  it('retry every failed delivery, and rotate a Standard Webhooks secret with the default overlap', async () => {
    const retried = await postNothing('/deliveries/retry');
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.deepEqual(retried.body, { requeued: 0 });

    const source = await sy.createSource('optional bodies');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: 'http://127.0.0.1:9/hook' }], standardWebhooks: {} },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const before = Date.now();
    const rotated = await postNothing(`/sources/${source.id}/destinations/webhooks/standard-webhooks/rotate`);
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    assert.ok(Date.parse(rotated.body.previousValidUntil) >= before + 86_400_000, 'the default overlap, a day');
  });

  it('a body with a required field is still asked for, and a whole object to store is never taken as empty', async () => {
    const created = await postNothing('/sources');
    assert.equal(created.status, 400);
    assert.equal(created.body.error.code, 'invalid_request');
    // A tracking plan's schema requires no field, but no body must not replace a plan with an empty one that lets everything through.
    const source = await sy.createSource('a plan kept');
    const plan = await sy.admin('POST', `/sources/${source.id}/tracking-plan`, { name: 'Web', events: { 'Order Completed': {} }, controls: { unplannedEvents: 'block' } });
    assert.ok(plan.status < 300, JSON.stringify(plan.body));
    const replaced = await postNothing(`/sources/${source.id}/tracking-plan`);
    assert.equal(replaced.status, 400, JSON.stringify(replaced.body));
    const put = await fetch(`${sy.url}/admin/v1/sources/${source.id}/tracking-plan`, { method: 'PUT', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: ' ' });
    assert.equal(put.status, 400);
    const kept = await sy.admin('GET', `/sources/${source.id}/tracking-plan`);
    assert.equal(kept.body.controls.unplannedEvents, 'block');
    assert.equal(kept.body.version, plan.body.version);
  });
});
