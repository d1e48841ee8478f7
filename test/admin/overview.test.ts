import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, sourceWithWebhooks } from '../helpers/webhooks.js';

const sum = (counts: number[] | undefined): number => (counts ?? []).reduce((a, b) => a + b, 0);

describe('GET /admin/v1/overview/traffic', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;

  before(async () => {
    sy = await startTestSwitchyard(FAST_RETRIES);
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
    await sy.close();
  });

  it('counts the messages received by status and the delivery rounds by outcome, one column per minute', async () => {
    const source = await sourceWithWebhooks(sy, [receiver.url]);
    receiver.reply = (_request, index) => ({ status: index === 0 ? 503 : 200 });
    for (const event of ['A', 'B']) assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u', event, messageId: `m-${event}` })).status, 200);
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'A', messageId: 'm-A' }); // a duplicate
    await sy.send('/v1/track', source.writeKey, { event: 'no user' }); // rejected: no userId or anonymousId

    const traffic = await eventually(async () => {
      const answer = await sy.admin('GET', '/overview/traffic');
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return sum(answer.body.deliveries.byOutcome.succeeded) === 2 ? answer.body : undefined;
    }, 10_000, 'both deliveries to succeed');
    assert.equal(traffic.minutes.length, 60);
    assert.equal(Date.parse(traffic.to) - Date.parse(traffic.from), 3_600_000);
    for (const counts of Object.values<number[]>(traffic.messages.byStatus)) assert.equal(counts.length, 60);
    assert.equal(sum(traffic.messages.byStatus.accepted), 2);
    assert.equal(sum(traffic.messages.byStatus.duplicate), 1);
    assert.equal(sum(traffic.messages.byStatus.rejected), 1);
    assert.equal(traffic.messages.total, 4);
    assert.equal(sum(traffic.deliveries.byOutcome.retried), 1, 'the first round got a 503 and was retried');
    assert.equal(sum(traffic.deliveries.byOutcome.failed), 0);
  });

  it('takes a number of minutes, and refuses a bad one naming it', async () => {
    const short = await sy.admin('GET', '/overview/traffic?minutes=5');
    assert.equal(short.body.minutes.length, 5);
    const bad = await sy.admin('GET', '/overview/traffic?minutes=0');
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_request');
    assert.match(bad.body.error.message, /^minutes /);
  });

  it('needs the admin token', async () => {
    assert.equal((await fetch(`${sy.url}/admin/v1/overview/traffic`)).status, 401);
  });
});
