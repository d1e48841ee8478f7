import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { sourceWithWebhooks } from '../helpers/webhooks.js';

/**
 * Retries fast (20 ms first), so one failing delivery reaches the breaker's
 * five failures in a row at once; a retry delay cap of 5 s, so the circuit
 * opens for 5 s and probes no faster; a long retry window, so nothing fails
 * while the test looks.
 */
const FLAGS: Readonly<Record<string, string>> = {
  'allow-private-receivers': 'true',
  'retry-base-ms': '20',
  'retry-max-delay-ms': '5000',
  'retry-window-ms': '120000',
  'delivery-timeout-ms': '30000',
};

/** The value of one series of `/metrics`, or undefined when it is absent. */
async function metric(sy: TestSwitchyard, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${sy.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * The reported trap: a receiver failing 5 times in a row had its circuit
 * opened, and its deliveries sat `pending` with no attempt and no reason
 * anywhere. `GET /deliveries/:id` now names the circuit (this node's view)
 * and `/metrics` counts open circuits by kind.
 */
for (const [name, flags] of [
  ['stage thread', {}],
  ['one thread', { workers: '0' }],
] as const) {
  describe(`a circuit held open shows in the admin API and /metrics (circuit-visibility, ${name})`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ ...FLAGS, ...flags });
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    it('a pending delivery held by an open circuit has heldBy naming the receiver origin; gone once the receiver recovers', { timeout: 120_000 }, async () => {
      receiver.reply = () => ({ status: 503 });
      const source = await sourceWithWebhooks(sy, [`${receiver.url}?token=s3cret-in-query`]);
      const origin = `http://127.0.0.1:${receiver.port}`;
      assert.equal(await metric(sy, 'switchyard_delivery_circuits_open{kind="receiver"}'), 0, 'no circuit is open before any failure');

      assert.equal((await sy.send('/v1/track', source.writeKey, { type: 'track', userId: 'u1', event: 'E', messageId: 'cv-1' })).status, 200);
      // Retried at once, five times: the fifth failure opens the circuit, and
      // from then on the delivery is held without attempts while the receiver
      // fails (a probe that fails opens it again).
      const held = await eventually(
        async () => {
          const list = (await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries as any[];
          if (list.length !== 1) return undefined;
          const detail = (await sy.admin('GET', `/deliveries/${list[0].id}`)).body;
          // The breaker opens as the fifth answer comes; its attempt is recorded a moment later.
          return detail.status === 'pending' && detail.heldBy !== undefined && detail.attemptCount >= 5 ? detail : undefined;
        },
        60_000,
        'the delivery to show heldBy',
      );
      assert.equal(held.attempts.length, held.attemptCount, 'a held round records no attempt');
      assert.equal(held.heldBy.length, 1);
      const [by] = held.heldBy;
      assert.equal(by.reason, 'circuit-open');
      assert.equal(by.target, origin, 'the origin only: never the path or query of a receiver URL');
      assert.ok(by.state === 'open' || by.state === 'half-open', by.state);
      if (by.state === 'open') assert.ok(!Number.isNaN(Date.parse(by.until)), by.until);
      assert.doesNotMatch(JSON.stringify(held.heldBy), /s3cret/);
      // The list stays as it was: heldBy is a detail.
      const listed = (await sy.admin('GET', `/deliveries?sourceId=${source.id}`)).body.deliveries[0];
      assert.equal(listed.heldBy, undefined);

      assert.equal(await metric(sy, 'switchyard_delivery_circuits_open{kind="receiver"}'), 1);
      assert.equal(await metric(sy, 'switchyard_delivery_circuits_open{kind="function"}'), 0);
      assert.equal(await metric(sy, 'switchyard_delivery_circuits_opened_total{kind="receiver"}'), 1, 'opened once: failed probes keep it open, not counted again');
      const text = await (await fetch(`${sy.url}/metrics`)).text();
      assert.doesNotMatch(text, /127\.0\.0\.1:\d+|s3cret/, 'no origin, URL or secret in any label');

      // The receiver recovers: the next probe closes the circuit, the delivery succeeds, nothing holds it.
      receiver.reply = () => ({ status: 200 });
      const done = await eventually(
        async () => {
          const detail = (await sy.admin('GET', `/deliveries/${held.id}`)).body;
          return detail.status === 'succeeded' ? detail : undefined;
        },
        90_000,
        'the delivery to succeed after the receiver recovered',
      );
      assert.equal(done.heldBy, undefined);
      await eventually(async () => ((await metric(sy, 'switchyard_delivery_circuits_open{kind="receiver"}')) === 0 ? true : undefined), 30_000, 'the gauge back to 0');
    });
  });
}
