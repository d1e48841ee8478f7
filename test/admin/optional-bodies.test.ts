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

  it('a body with a required field is still asked for', async () => {
    const created = await postNothing('/sources');
    assert.equal(created.status, 400);
    assert.equal(created.body.error.code, 'invalid_request');
  });
});
