import assert from 'node:assert/strict';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver, startSelfSignedReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';
import { FAST_RETRIES, listDeliveries, waitForDelivery } from '../helpers/webhooks.js';


/**
 * Gaps in the function destinations' tests (docs/functions.md, "Outcomes",
 * "Network rules", "Settings and secrets"): a ValidationError, a network
 * error thrown out of the handler, an untrusted certificate, settings over
 * 64 KB on update, and "retry all failed since" for function deliveries.
 */

/** Loopback stand-ins allowed, fast backoff, and a retry window long enough that no machine is too slow for it. */
// The sandbox's limits: calls short enough for the tests that time out, a small heap.
const FLAGS: Readonly<Record<string, string>> = { ...FAST_RETRIES, 'retry-window-ms': '120000', 'transform-timeout-ms': '3000', 'transform-memory-mb': '32' };

/** Throws ValidationError for a track without `properties.email`, else posts the event to settings.url. */
const VALIDATOR = `
async function onTrack(event, settings) {
  console.log('checking', event.event);
  if (!event.properties || typeof event.properties.email !== 'string') throw new ValidationError('properties.email is required');
  const res = await fetch(settings.url + '/valid', { method: 'POST', body: JSON.stringify({ id: event.messageId }) });
  console.log('got', res.status);
}`;

/** Posts to settings.url; a network error (a TypeError "fetch failed: …") is left to escape the handler. */
const POSTER = `
async function onTrack(event, settings) {
  const res = await fetch(settings.url + '/net', { method: 'POST', body: JSON.stringify({ id: event.messageId }) });
  console.log('got', res.status);
}`;

/** Fails with a plain Error while settings.mode is 'fail'; posts to settings.url otherwise. */
const MODAL = `
async function onTrack(event, settings) {
  if (settings.mode === 'fail') throw new Error('mode is fail for ' + event.event);
  const res = await fetch(settings.url + '/modal', { method: 'POST', body: JSON.stringify({ id: event.messageId }) });
  if (res.status !== 200) throw new RetryError('got ' + res.status);
}`;

const track = (event: string, properties: Record<string, unknown> = {}, messageId?: string) => ({ userId: 'u1', event, properties, ...(messageId !== undefined && { messageId }) });

async function addFunction(sy: TestSwitchyard, sourceId: string, body: Record<string, unknown>): Promise<{ id: string; version: number; updatedAt: string }> {
  const created = await sy.admin('POST', `/sources/${sourceId}/destinations/functions`, body);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body;
}

async function functionDeliveries(sy: TestSwitchyard, sourceId: string, status?: string): Promise<any[]> {
  return (await listDeliveries(sy, sourceId, status)).filter((d) => d.destination === 'function');
}

/**
 * A 127.0.0.1 port nothing listens on: one the kernel gave a server that was
 * then closed (the kernel hands out port-0 binds at random, so another taker
 * in the meantime is unlikely; the live stand-in is reached by new settings,
 * not by reusing this port).
 */
async function refusedPort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

function outcomeSuite(storeName: string, flags: () => Record<string, string>): void {
  describe(`function outcomes and network errors (${storeName})`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      sy = await startTestSwitchyard({ ...FLAGS, ...flags() });
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    it('a ValidationError fails the delivery at once: one attempt, no retry, its type and message recorded', async () => {
      const source = await sy.createSource('fn-validation');
      const fn = await addFunction(sy, source.id, { name: 'Validator', code: VALIDATOR, settings: { url: receiver.url } });
      const badId = `bad-${source.id}`;
      const goodId = `good-${source.id}`;
      await sy.send('/v1/track', source.writeKey, track('No Email', {}, badId));
      await sy.send('/v1/track', source.writeKey, track('With Email', { email: 'a@example.com' }, goodId));
      const deliveries = await eventually(async () => {
        const found = await functionDeliveries(sy, source.id);
        return found.length === 2 ? found : undefined;
      });
      const bad = deliveries.find((d) => d.messageId === badId);
      const good = deliveries.find((d) => d.messageId === goodId);
      assert.ok(bad !== undefined && good !== undefined, JSON.stringify(deliveries));
      // The valid message goes through: the function works, only the invalid one is refused.
      await waitForDelivery(sy, good.id, 'succeeded', 30_000);

      // Settled (failed) or retried, whichever comes first: a retry would show a second attempt.
      const detail = await eventually(async () => {
        const read = (await sy.admin('GET', `/deliveries/${bad.id}`)).body;
        return read.status !== 'pending' || read.attempts.length >= 2 ? read : undefined;
      }, 30_000, 'the invalid message\'s delivery to settle');
      assert.equal(detail.status, 'failed', JSON.stringify(detail));
      assert.equal(detail.attempts.length, 1, 'failed at once, not retried');
      assert.equal(detail.nextAttemptAt, undefined, 'no retry scheduled');
      assert.equal(detail.functionId, fn.id);
      assert.equal(detail.lastError, `function:${fn.id}: ValidationError: properties.email is required (line 4, column 78)`);
      const [attempt] = detail.attempts;
      assert.equal(attempt.url, `function:${fn.id}`);
      assert.equal(attempt.error, 'ValidationError: properties.email is required (line 4, column 78)');
      assert.equal(typeof attempt.durationMs, 'number');
      assert.equal(attempt.function.version, 1);
      assert.equal(attempt.function.outcome, 'failed');
      assert.equal(attempt.function.errorType, 'ValidationError');
      assert.deepEqual(attempt.function.fetches, []);
      assert.deepEqual(attempt.function.logs, ['checking No Email']);
      assert.equal(receiver.requests.filter((r) => r.body.includes(badId)).length, 0);
      assert.equal(receiver.requests.filter((r) => r.body.includes(goodId)).length >= 1, true);
    });

    it('a network error escaping the handler is retried, not failed; settings pointed at a live stand-in then deliver it', async () => {
      const port = await refusedPort();
      const source = await sy.createSource('fn-network');
      const fn = await addFunction(sy, source.id, { name: 'Poster', code: POSTER, settings: { url: `http://127.0.0.1:${port}` } });
      const messageId = `net-${source.id}`;
      await sy.send('/v1/track', source.writeKey, track('Refused', {}, messageId));
      const [delivery] = await eventually(async () => {
        const found = await functionDeliveries(sy, source.id);
        return found.length === 1 ? found : undefined;
      });

      const retrying = await eventually(async () => {
        const read = (await sy.admin('GET', `/deliveries/${delivery.id}`)).body;
        if (read.status !== 'pending') throw new Error(`expected the delivery to be retried: ${JSON.stringify(read)}`);
        return read.attempts.length >= 2 ? read : undefined;
      }, 30_000, 'a second attempt');
      assert.equal(typeof retrying.nextAttemptAt, 'string', 'a next attempt is scheduled');
      for (const attempt of retrying.attempts) {
        assert.equal(attempt.url, `function:${fn.id}`);
        assert.equal(attempt.function.outcome, 'retry', JSON.stringify(attempt));
        assert.equal(attempt.function.errorType, 'TypeError');
        assert.match(attempt.error, /^TypeError: fetch failed: ECONNREFUSED/);
        assert.equal(attempt.function.fetches.length, 1);
        assert.equal(attempt.function.fetches[0].method, 'POST');
        assert.equal(attempt.function.fetches[0].url, `http://127.0.0.1:${port}/net`);
        assert.match(attempt.function.fetches[0].error, new RegExp(`^fetch failed: ECONNREFUSED.*127\\.0\\.0\\.1:${port}`));
        assert.equal(attempt.function.fetches[0].status, undefined);
      }

      // A queued delivery runs with the destination as it is now.
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/functions/${fn.id}`, { settings: { url: receiver.url } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const done = await waitForDelivery(sy, delivery.id, 'succeeded', 60_000);
      const last = done.attempts.at(-1);
      assert.equal(last.function.outcome, 'delivered');
      assert.equal(last.function.fetches[0].url, `${receiver.url}/net`);
      assert.equal(last.function.fetches[0].status, 200);
      assert.deepEqual(last.function.logs, ['got 200']);
      assert.ok(done.attempts.slice(0, -1).every((a: any) => a.function.outcome === 'retry'), JSON.stringify(done.attempts));
      assert.ok(receiver.requests.some((r) => r.path === '/hook/net' && r.body.includes(messageId)));
    });

    it('refuses settings over 64 KB on update, naming the field, and leaves the stored function as it was', async () => {
      const source = await sy.createSource('fn-settings');
      const original = { url: receiver.url, apiKey: 'sk_live_settings', channel: '#general' };
      const fn = await addFunction(sy, source.id, { name: 'Chat', code: POSTER, settings: original });
      const before = (await sy.admin('GET', `/sources/${source.id}/destinations/functions/${fn.id}`)).body;
      assert.deepEqual(before.settings, { ...original, apiKey: '********' });

      const huge = await sy.admin('PUT', `/sources/${source.id}/destinations/functions/${fn.id}`, { settings: { url: receiver.url, channel: 'x'.repeat(65 * 1024) } });
      assert.equal(huge.status, 400, JSON.stringify(huge.body));
      assert.equal(huge.body.error.code, 'invalid_request');
      assert.equal(huge.body.error.message, 'settings must be at most 64 KB as JSON');
      // With new code beside it: neither is saved (no version 2).
      const withCode = await sy.admin('PUT', `/sources/${source.id}/destinations/functions/${fn.id}`, { code: `${POSTER}\n// v2`, settings: { blob: 'y'.repeat(70 * 1024) } });
      assert.equal(withCode.status, 400, JSON.stringify(withCode.body));
      assert.equal(withCode.body.error.code, 'invalid_request');
      assert.match(withCode.body.error.message, /^settings .*64 KB/);

      const afterwards = (await sy.admin('GET', `/sources/${source.id}/destinations/functions/${fn.id}`)).body;
      assert.deepEqual(afterwards, before, 'the read is unchanged: settings (masked), version, code, updatedAt');
      const stored = await sy.store.getFunctionDestination(fn.id);
      assert.deepEqual(stored?.settings, original);
      assert.equal(stored?.version, 1);

      // Under 64 KB as sent, over it once the kept secret is merged in.
      const secretive = await addFunction(sy, source.id, { name: 'Secretive', code: POSTER, settings: { apiKey: 'k'.repeat(40 * 1024) } });
      const merged = await sy.admin('PUT', `/sources/${source.id}/destinations/functions/${secretive.id}`, { settings: { notes: 'n'.repeat(30 * 1024) } });
      assert.equal(merged.status, 400, JSON.stringify(merged.body));
      assert.equal(merged.body.error.code, 'invalid_request');
      assert.equal(merged.body.error.message, 'settings must be at most 64 KB as JSON');
      assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/destinations/functions/${secretive.id}`)).body.settings, { apiKey: '********' });
      assert.deepEqual((await sy.store.getFunctionDestination(secretive.id))?.settings, { apiKey: 'k'.repeat(40 * 1024) });
    });

    it('retry all failed since a time re-queues failed function deliveries from then on, not those that failed before', async () => {
      const source = await sy.createSource('fn-retry-all');
      const fn = await addFunction(sy, source.id, { name: 'Modal', code: MODAL, settings: { mode: 'fail', url: receiver.url } });
      const waitFailed = async (count: number): Promise<any[]> =>
        eventually(async () => {
          const failed = await functionDeliveries(sy, source.id, 'failed');
          return failed.length === count ? failed : undefined;
        }, 30_000, `${count} failed function deliveries`);

      const earlyIds = [0, 1].map((i) => `early-${i}-${source.id}`);
      for (const id of earlyIds) await sy.send('/v1/track', source.writeKey, track('Early', {}, id));
      const early = await waitFailed(2);
      // `since` is after every early failure (the store's times are this process's clock, in ms).
      const lastEarly = Math.max(...early.map((d) => Date.parse(d.updatedAt)));
      const since = await eventually(() => (Date.now() > lastEarly ? Date.now() : undefined));

      const lateIds = [0, 1, 2].map((i) => `late-${i}-${source.id}`);
      for (const id of lateIds) await sy.send('/v1/track', source.writeKey, track('Late', {}, id));
      const all = await waitFailed(5);
      const late = all.filter((d) => lateIds.includes(d.messageId));
      assert.equal(late.length, 3);
      for (const delivery of all) {
        const detail = (await sy.admin('GET', `/deliveries/${delivery.id}`)).body;
        assert.equal(detail.attempts.length, 1);
        assert.equal(detail.attempts[0].function.errorType, 'Error');
        assert.equal(detail.attempts[0].function.outcome, 'failed');
      }

      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/functions/${fn.id}`, { settings: { mode: 'succeed', url: receiver.url } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const retried = await sy.admin('POST', '/deliveries/retry', { sourceId: source.id, since: new Date(since).toISOString() });
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      assert.deepEqual(retried.body, { requeued: 3 });

      for (const delivery of late) {
        const done = await waitForDelivery(sy, delivery.id, 'succeeded', 30_000);
        assert.equal(done.attempts.length, 2, JSON.stringify(done.attempts));
        assert.deepEqual(done.attempts.map((a: any) => a.function.outcome), ['failed', 'delivered']);
        assert.equal(done.attempts[1].function.fetches[0].status, 200);
      }
      for (const delivery of early.filter((d) => earlyIds.includes(d.messageId))) {
        const detail = (await sy.admin('GET', `/deliveries/${delivery.id}`)).body;
        assert.equal(detail.status, 'failed', 'failed before `since`: not re-queued');
        assert.equal(detail.attempts.length, 1);
      }
      const reached = receiver.requests.filter((r) => r.path === '/hook/modal').map((r) => JSON.parse(r.body).id as string);
      for (const id of lateIds) assert.ok(reached.includes(id), `${id} reached the stand-in`);
      for (const id of earlyIds) assert.ok(!reached.includes(id), `${id} was not sent`);
    });
  });
}

describe('function fetch over TLS with a certificate nobody signed (sqlite)', () => {
  let sy: TestSwitchyard;
  let receiver: TestReceiver;

  before(async () => {
    receiver = await startSelfSignedReceiver();
    sy = await startTestSwitchyard(FLAGS);
  });
  after(async () => {
    await sy?.close();
    await receiver?.close();
  });


  const untrusted = 'fetch failed: TLS certificate not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)';

  it('fails the delivery at once with the TLS error recorded on the fetch, and sends nothing', async () => {
    assert.match(receiver.url, /^https:/);
    const source = await sy.createSource('fn-tls');
    const fn = await addFunction(sy, source.id, { name: 'Poster', code: POSTER, settings: { url: receiver.url } });
    await sy.send('/v1/track', source.writeKey, track('Secure'));
    const [delivery] = await eventually(async () => {
      const found = await functionDeliveries(sy, source.id);
      return found.length === 1 ? found : undefined;
    });
    const detail = await eventually(async () => {
      const read = (await sy.admin('GET', `/deliveries/${delivery.id}`)).body;
      return read.status !== 'pending' || read.attempts.length >= 2 ? read : undefined;
    }, 30_000, 'the delivery to settle');
    assert.equal(detail.status, 'failed', JSON.stringify(detail));
    assert.equal(detail.attempts.length, 1, 'not retried');
    const [attempt] = detail.attempts;
    assert.equal(attempt.url, `function:${fn.id}`);
    assert.equal(attempt.function.outcome, 'failed');
    assert.equal(attempt.function.errorType, 'TypeError');
    assert.equal(attempt.error, `TypeError: ${untrusted}`);
    assert.equal(attempt.function.fetches.length, 1);
    assert.equal(attempt.function.fetches[0].method, 'POST');
    assert.equal(attempt.function.fetches[0].url, `${receiver.url}/net`);
    assert.equal(attempt.function.fetches[0].error, untrusted);
    assert.equal(attempt.function.fetches[0].status, undefined);
    assert.equal(receiver.requests.length, 0, 'no request was sent over the untrusted connection');
  });

  it('POST /functions/test shows the same error in its fetches, storing nothing', async () => {
    const deliveriesBefore = (await sy.admin('GET', '/deliveries?limit=1000')).body.deliveries.length;
    const tested = await sy.admin('POST', '/functions/test', { code: POSTER, settings: { url: receiver.url }, events: [{ type: 'track', event: 'Secure', properties: {} }] });
    assert.equal(tested.status, 200, JSON.stringify(tested.body));
    const [result] = tested.body.results;
    assert.equal(result.outcome, 'failed', JSON.stringify(result));
    assert.equal(result.errorType, 'TypeError');
    assert.equal(result.error, untrusted);
    assert.equal(result.fetches.length, 1);
    assert.equal(result.fetches[0].url, `${receiver.url}/net`);
    assert.equal(result.fetches[0].error, untrusted);
    assert.equal(receiver.requests.length, 0);
    assert.equal((await sy.admin('GET', '/deliveries?limit=1000')).body.deliveries.length, deliveriesBefore, 'a test run stores no delivery');
  });
});

outcomeSuite('sqlite', () => ({}));

await describePostgres('function outcomes and network errors on PostgreSQL', () => {
  let db: FreshDatabase;
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await db?.drop();
  });
  outcomeSuite('postgres', () => ({ 'database-url': db.url }));
});
