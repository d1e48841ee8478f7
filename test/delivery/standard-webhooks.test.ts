import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { standardSignature, standardWebhookHeaders } from '../../src/delivery/signer.js';
import { type TestReceiver, type ReceivedRequest, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, segmentSignatureMatches } from '../helpers/webhooks.js';

/** The headers a receiver hands the `standardwebhooks` verifier. */
function standardHeaders(request: ReceivedRequest): Record<string, string> {
  return {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  };
}

/** Verifies as a receiver would, with the spec's own library; throws when the signature does not match. */
function verify(secret: string, request: ReceivedRequest): void {
  new Webhook(secret).verify(request.body, standardHeaders(request));
}

describe('Standard Webhooks signatures', () => {
  it('matches the known-answer example of the Standard Webhooks libraries', () => {
    // The example every reference library tests: secret, id, timestamp, payload → signature.
    assert.equal(
      standardSignature('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}'),
      'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    );
  });

  it('replaces an id that is not a plain token (the spec forbids "." in it) by a stable digest', () => {
    const settings = { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' };
    const plain = standardWebhookHeaders(settings, 'abc-123', '{}', 1_700_000_000_000);
    assert.equal(plain['webhook-id'], 'abc-123');
    assert.equal(plain['webhook-timestamp'], '1700000000');
    const dotted = standardWebhookHeaders(settings, 'a.b', '{}', 1_700_000_000_000);
    assert.match(dotted['webhook-id']!, /^sy_[A-Za-z0-9_-]{43}$/);
    assert.equal(standardWebhookHeaders(settings, 'a.b', '{}', 1_700_000_999_000)['webhook-id'], dotted['webhook-id'], 'the same on every attempt');
  });

  describe('end to end', () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;
    let source: { id: string; writeKey: string };
    const route = () => `/sources/${source.id}/destinations/webhooks`;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard(FAST_RETRIES);
      source = await sy.createSource('standard-webhooks');
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    async function sendAndReceive(messageId: string): Promise<ReceivedRequest> {
      const sent = await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'Signed Up', messageId });
      assert.equal(sent.status, 200);
      return eventually(() => receiver.requests.find((r) => JSON.parse(r.body).messageId === messageId), 10_000, `message ${messageId}`);
    }

    it('generates a secret for {}, masks it, and signs every POST beside X-Signature', async () => {
      const put = await sy.admin('PUT', route(), {
        enabled: true,
        settings: { webhooks: [{ url: receiver.url }], sharedSecret: 'segment-secret', standardWebhooks: {} },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.deepEqual(put.body.settings.standardWebhooks, { secret: 'whsec_********' });
      const read = await sy.admin('GET', route());
      assert.deepEqual(read.body.settings.standardWebhooks, { secret: 'whsec_********' });

      const revealed = await sy.admin('GET', `${route()}/standard-webhooks/secret`);
      assert.equal(revealed.status, 200);
      const secret = revealed.body.secret as string;
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, '32 random bytes');

      const request = await sendAndReceive('m-standard-1');
      assert.equal(request.headers['webhook-id'], 'm-standard-1', 'the messageId');
      assert.match(String(request.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/, 'one signature');
      verify(secret, request);
      assert.ok(segmentSignatureMatches(request, 'segment-secret'), 'X-Signature still sent');
      assert.throws(() => verify('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', request), /signature/i, 'another secret does not verify');

      // A GET edited and PUT back carries the mask: the same secret stays.
      const again = await sy.admin('PUT', route(), { enabled: true, settings: read.body.settings });
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal((await sy.admin('GET', `${route()}/standard-webhooks/secret`)).body.secret, secret);
    });

    it('rotates: both signatures, new first, during the overlap; only the new one after it', async () => {
      const old = (await sy.admin('GET', `${route()}/standard-webhooks/secret`)).body.secret as string;
      const rotated = await sy.admin('POST', `${route()}/standard-webhooks/rotate`, { overlapSeconds: 3600 });
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      const fresh = rotated.body.secret as string;
      assert.notEqual(fresh, old);
      assert.ok(Date.parse(rotated.body.previousValidUntil) > Date.now() + 3_500_000);
      const shown = (await sy.admin('GET', route())).body;
      assert.equal(shown.settings.standardWebhooks.previousValidUntil, rotated.body.previousValidUntil);
      // What GET shows can be sent back during the overlap (as the CLI does to change filters or receivers): the rotation stays.
      const putBack = await sy.admin('PUT', route(), { enabled: shown.enabled, settings: shown.settings, filters: shown.filters });
      assert.equal(putBack.status, 200, JSON.stringify(putBack.body));
      assert.equal((await sy.admin('GET', route())).body.settings.standardWebhooks.previousValidUntil, rotated.body.previousValidUntil);
      const withNewSecret = await sy.admin('PUT', route(), {
        enabled: shown.enabled,
        filters: shown.filters,
        settings: { ...shown.settings, standardWebhooks: { secret: fresh, previousValidUntil: '2999-01-01T00:00:00.000Z' } },
      });
      assert.equal(withNewSecret.status, 400, 'a rotation\'s end is set by rotating, not by a PUT');
      assert.match(withNewSecret.body.error.message, /previousValidUntil/);
      // Beside the mask it is ignored, but it must be a time, as GET shows it.
      for (const odd of [42, 'soon', {}, '']) {
        const bad = await sy.admin('PUT', route(), {
          enabled: shown.enabled,
          filters: shown.filters,
          settings: { ...shown.settings, standardWebhooks: { ...shown.settings.standardWebhooks, previousValidUntil: odd } },
        });
        assert.equal(bad.status, 400, `previousValidUntil ${JSON.stringify(odd)}: ${JSON.stringify(bad.body)}`);
        assert.match(bad.body.error.message, /previousValidUntil must be an ISO-8601 time/);
      }
      assert.equal((await sy.admin('GET', route())).body.settings.standardWebhooks.previousValidUntil, rotated.body.previousValidUntil, 'refused PUTs change nothing');
      // The shared secret's mask is not this secret's: the answer says which mask keeps it.
      const sharedMask = await sy.admin('PUT', route(), { enabled: shown.enabled, filters: shown.filters, settings: { ...shown.settings, standardWebhooks: { secret: '********' } } });
      assert.equal(sharedMask.status, 400);
      assert.match(sharedMask.body.error.message, /send the mask GET shows, "whsec_\*{8}"/);

      const during = await sendAndReceive('m-standard-2');
      const signatures = String(during.headers['webhook-signature']).split(' ');
      assert.equal(signatures.length, 2);
      const id = String(during.headers['webhook-id']);
      const timestamp = Number(during.headers['webhook-timestamp']);
      assert.equal(signatures[0], standardSignature(fresh, id, timestamp, during.body), 'the new secret first');
      assert.equal(signatures[1], standardSignature(old, id, timestamp, during.body));
      verify(fresh, during);
      verify(old, during);

      const ended = await sy.admin('POST', `${route()}/standard-webhooks/rotate`, { overlapSeconds: 0 });
      assert.equal(ended.status, 200);
      const after = await sendAndReceive('m-standard-3');
      assert.equal(String(after.headers['webhook-signature']).split(' ').length, 1);
      verify(ended.body.secret, after);
      assert.throws(() => verify(fresh, after), /signature/i, 'no overlap: the replaced secret no longer signs');
    });

    it('keeps a client messageId with a "." out of the signed id, and still verifies', async () => {
      const secret = (await sy.admin('GET', `${route()}/standard-webhooks/secret`)).body.secret as string;
      const request = await sendAndReceive('order.42');
      assert.match(String(request.headers['webhook-id']), /^sy_/);
      verify(secret, request);
    });

    it('refuses a malformed secret, naming the field, and a rotation where it is off', async () => {
      const bad = await sy.admin('PUT', route(), { enabled: true, settings: { webhooks: [{ url: receiver.url }], standardWebhooks: { secret: 'whsec_c2hvcnQ=' } } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_receivers');
      assert.match(bad.body.error.message, /settings\.standardWebhooks\.secret must encode 24 to 64 bytes/);

      const unknown = await sy.admin('PUT', route(), { enabled: true, settings: { webhooks: [{ url: receiver.url }], standardWebhooks: { previousSecret: 'x' } } });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.error.message, /settings\.standardWebhooks\.previousSecret/);

      const off = await sy.admin('PUT', route(), { enabled: true, settings: { webhooks: [{ url: receiver.url }] } });
      assert.equal(off.status, 200);
      assert.equal(off.body.settings.standardWebhooks, undefined);
      const rotate = await sy.admin('POST', `${route()}/standard-webhooks/rotate`, {});
      assert.equal(rotate.status, 409);
      assert.equal(rotate.body.error.code, 'standard_webhooks_not_enabled');
      assert.equal((await sy.admin('GET', `${route()}/standard-webhooks/secret`)).status, 409);

      const sent = await sendAndReceive('m-standard-off');
      assert.equal(sent.headers['webhook-signature'], undefined, 'off: no Standard Webhooks headers');
    });
  });
});
