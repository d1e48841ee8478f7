import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ReceivedRequest, type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

describe('replays', () => {
  let sy: TestSwitchyard;
  let first: TestReceiver;
  let second: TestReceiver;
  let source: { id: string; writeKey: string };

  const replayed = (receiver: TestReceiver): ReceivedRequest[] => receiver.requests.filter((r) => r.headers['x-switchyard-replay'] !== undefined);
  const live = (receiver: TestReceiver): ReceivedRequest[] => receiver.requests.filter((r) => r.headers['x-switchyard-replay'] === undefined);
  const idOf = (request: ReceivedRequest): string => JSON.parse(request.body).messageId as string;

  before(async () => {
    first = await startReceiver();
    second = await startReceiver();
    // Short retry delays: on a busy machine a POST may time out, and the default backoff (and the
    // circuit breaker it opens) could push its retry past a test's wait without anything being wrong.
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '50', 'retry-max-delay-ms': '1000' });
    source = await sy.createSource('replays');
    const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: first.url }, { url: second.url }], sharedSecret: 'replay-secret' },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  });
  after(async () => {
    await sy?.close();
    await first?.close();
    await second?.close();
  });

  it('re-delivers a time range, in order, of the chosen types and events, to the chosen receiver, with the original body', async () => {
    const from = new Date().toISOString();
    const batch = Array.from({ length: 30 }, (_, i) =>
      i % 3 === 2
        ? { type: 'identify', userId: `u${i}`, traits: { n: i }, messageId: `r-${i}` }
        : { type: 'track', userId: `u${i}`, event: i % 3 === 0 ? 'Bought' : 'Viewed', messageId: `r-${i}` },
    );
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    await eventually(() => (live(first).length >= 30 && live(second).length >= 30 ? true : undefined), 10_000, 'live delivery');
    await new Promise((resolve) => setTimeout(resolve, 5)); // `to` after every receivedAt
    const to = new Date().toISOString();

    const created = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to, types: ['track'], events: ['Bought'], receivers: [first.url] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'running');
    assert.match(created.body.id, /^rpl_/);
    const replayId = created.body.id as string;

    const done = await eventually(async () => {
      const { body } = await sy.admin('GET', `/replays/${replayId}`);
      return body.status === 'done' ? body : undefined;
    }, 15_000, 'the replay to finish');
    const expected = batch.filter((m) => m.type === 'track' && m.event === 'Bought').map((m) => m.messageId);
    assert.deepEqual([done.queued, done.delivered, done.failed], [expected.length, expected.length, 0]);
    assert.deepEqual(replayed(first).map(idOf), expected, 'only those, in order');
    assert.ok(replayed(first).every((r) => r.headers['x-switchyard-replay'] === replayId));
    assert.deepEqual(replayed(second), [], 'only the chosen receiver');
    for (const request of replayed(first)) {
      const original = live(first).find((r) => idOf(r) === idOf(request))!;
      assert.equal(request.body, original.body, 'the original body');
      assert.equal(request.headers['x-signature'], original.headers['x-signature'], 'so the same signature');
    }
    const listed = await sy.admin('GET', `/sources/${source.id}/replays`);
    assert.deepEqual(listed.body.replays.map((r: { id: string }) => r.id), [replayId]);
    const deliveries = (await sy.admin('GET', `/deliveries?sourceId=${source.id}&limit=200`)).body.deliveries as Array<{ replayId?: string }>;
    assert.equal(deliveries.filter((d) => d.replayId === replayId).length, expected.length, 'replayed deliveries are recorded as deliveries');
  });

  it('leaves out suppressed users', async () => {
    const from = new Date().toISOString();
    const batch = ['keep', 'hide', 'keep'].map((user, i) => ({ type: 'track', userId: `s-${user}`, event: 'E', messageId: `s-${i}` }));
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    await eventually(() => (new Set(live(second).map(idOf).filter((id) => id.startsWith('s-'))).size === 3 ? true : undefined), 10_000, 'live delivery');
    const regulation = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['s-hide'] });
    assert.equal(regulation.status, 201, JSON.stringify(regulation.body));
    const created = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to: new Date(Date.now() + 1).toISOString(), receivers: [second.url] });
    const done = await eventually(async () => {
      const { body } = await sy.admin('GET', `/replays/${created.body.id}`);
      return body.status === 'done' ? body : undefined;
    }, 15_000, 'the replay to finish');
    assert.equal(done.queued, 2);
    assert.deepEqual(replayed(second).map(idOf), ['s-0', 's-2']);
  });

  it('cancels: nothing more is sent', async () => {
    const from = new Date().toISOString();
    const batch = Array.from({ length: 300 }, (_, i) => ({ type: 'track', userId: 'c', event: 'E', messageId: `c-${i}` }));
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    // Distinct ids, at either receiver: delivery is at least once (a busy machine may time a POST out and send it
    // again), and a message one receiver accepted is delivered, so a POST to the other that timed out is not sent again.
    const delivered = (): number => new Set([...live(first), ...live(second)].map(idOf).filter((id) => id.startsWith('c-'))).size;
    await eventually(() => (delivered() === 300 ? true : undefined), 90_000, 'live delivery');
    first.reply = (request) => (request.headers['x-switchyard-replay'] !== undefined ? { delayMs: 50 } : {});
    const created = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to: new Date(Date.now() + 1).toISOString(), receivers: [first.url] });
    const replayId = created.body.id as string;
    await eventually(() => (replayed(first).some((r) => r.headers['x-switchyard-replay'] === replayId) ? true : undefined), 10_000, 'the first replayed POST');
    const cancelled = await sy.admin('POST', `/replays/${replayId}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, 'cancelled');
    const settle = async (): Promise<number> => {
      for (;;) {
        const count = replayed(first).filter((r) => r.headers['x-switchyard-replay'] === replayId).length;
        await new Promise((resolve) => setTimeout(resolve, 500));
        if (replayed(first).filter((r) => r.headers['x-switchyard-replay'] === replayId).length === count) return count;
      }
    };
    const sent = await settle();
    assert.ok(sent < 300, `${sent} of 300 sent before the cancel took effect`);
    const after = await sy.admin('GET', `/replays/${replayId}`);
    assert.equal(after.body.status, 'cancelled');
    assert.ok(after.body.queued < 300 || after.body.delivered < 300);
  });

  it('never holds every slot of a receiver: with all replayed POSTs hanging, live messages still arrive', async () => {
    const from = new Date().toISOString();
    const batch = Array.from({ length: 150 }, (_, i) => ({ type: 'track', userId: 'h', event: 'E', messageId: `h-${i}` }));
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch })).status, 200);
    const ids = (receiver: TestReceiver): Set<string> => new Set(live(receiver).map(idOf).filter((id) => id.startsWith('h-')));
    await eventually(() => (ids(first).size === 150 && ids(second).size === 150 ? true : undefined), 30_000, 'live delivery');
    // A receiver that takes replayed POSTs and never answers them (until released).
    first.reply = (request) => (request.headers['x-switchyard-replay'] !== undefined ? { hang: true } : {});
    const created = await sy.admin('POST', `/sources/${source.id}/replays`, { from, to: new Date(Date.now() + 1).toISOString(), receivers: [first.url] });
    const replayId = created.body.id as string;
    const ofReplay = (): ReceivedRequest[] => replayed(first).filter((r) => r.headers['x-switchyard-replay'] === replayId);
    await eventually(() => (ofReplay().length > 0 ? true : undefined), 10_000, 'the first replayed POST');

    // Sent while the replay's POSTs hang: the worker allows 64 in flight per origin, a replay fewer.
    const liveBatch = Array.from({ length: 5 }, (_, i) => ({ type: 'track', userId: 'l', event: 'Live', messageId: `hl-${i}` }));
    assert.equal((await sy.send('/v1/batch', source.writeKey, { batch: liveBatch })).status, 200);
    await eventually(() => (liveBatch.every((m) => live(first).some((r) => idOf(r) === m.messageId)) ? true : undefined), 10_000, 'live messages past the hanging replay');
    // Distinct messages: a POST that timed out is sent again, still within the window.
    const held = new Set(ofReplay().map(idOf)).size;
    assert.ok(held <= 48, `${held} replayed messages in flight at once`);
    const during = await sy.admin('GET', `/replays/${replayId}`);
    assert.ok(during.body.queued <= 48 && during.body.queued < 150, `${during.body.queued} queued while none was answered`);

    first.release();
    const done = await eventually(async () => {
      const { body } = await sy.admin('GET', `/replays/${replayId}`);
      return body.status === 'done' ? body : undefined;
    }, 30_000, 'the replay to finish');
    assert.deepEqual([done.queued, done.delivered, done.failed], [150, 150, 0]);
    assert.deepEqual(new Set(ofReplay().map(idOf)), new Set(batch.map((m) => m.messageId)), 'every message, once the receiver answers');
  });

  it('runs at most 10 replays of a source at once (409 too_many_replays); a cancelled or finished one frees its place', async () => {
    const capped = await sy.createSource('capped');
    const put = await sy.admin('PUT', `/sources/${capped.id}/destinations/webhooks`, { enabled: true, settings: { webhooks: [{ url: first.url }] } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    // Running until their `to`, an hour ahead.
    const ahead = { from: new Date(Date.now() - 60_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString(), events: ['none'] };
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const created = await sy.admin('POST', `/sources/${capped.id}/replays`, ahead);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      ids.push(created.body.id as string);
    }
    const refused = await sy.admin('POST', `/sources/${capped.id}/replays`, ahead);
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'too_many_replays');
    assert.match(refused.body.error.message, /already has 10 replays running, the most a source may have: cancel one \(POST \/replays\/:id\/cancel/);
    const listed = await sy.admin('GET', `/sources/${capped.id}/replays`);
    assert.equal(listed.body.replays.length, 10, 'a refused replay is not stored');
    // Another source is not held back by this one's.
    const other = await sy.admin('POST', `/sources/${source.id}/replays`, ahead);
    assert.equal(other.status, 201, JSON.stringify(other.body));
    assert.equal((await sy.admin('POST', `/replays/${other.body.id}/cancel`)).status, 200);

    assert.equal((await sy.admin('POST', `/replays/${ids[0]}/cancel`)).body.status, 'cancelled');
    const again = await sy.admin('POST', `/sources/${capped.id}/replays`, ahead);
    assert.equal(again.status, 201, JSON.stringify(again.body));
    // One that finishes frees its place too: a range already past ends once it is sent.
    assert.equal((await sy.admin('POST', `/replays/${again.body.id}/cancel`)).status, 200);
    const past = await sy.admin('POST', `/sources/${capped.id}/replays`, { from: new Date(Date.now() - 60_000).toISOString(), to: new Date(Date.now() - 30_000).toISOString() });
    assert.equal(past.status, 201, JSON.stringify(past.body));
    await eventually(async () => ((await sy.admin('GET', `/replays/${past.body.id}`)).body.status === 'done' ? true : undefined), 15_000, 'the past replay to finish');
    const last = await sy.admin('POST', `/sources/${capped.id}/replays`, ahead);
    assert.equal(last.status, 201, JSON.stringify(last.body));
    for (const id of [...ids.slice(1), last.body.id as string]) assert.equal((await sy.admin('POST', `/replays/${id}/cancel`)).status, 200);
  });

  it('refuses what it cannot replay', async () => {
    const now = Date.now();
    const range = { from: new Date(now - 1000).toISOString(), to: new Date(now).toISOString() };
    const unknown = await sy.admin('POST', `/sources/${source.id}/replays`, { ...range, receivers: ['http://127.0.0.1:1/elsewhere'] });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error.code, 'unknown_receiver');
    const backwards = await sy.admin('POST', `/sources/${source.id}/replays`, { from: range.to, to: range.from });
    assert.equal(backwards.body.error.code, 'invalid_request');
    const badType = await sy.admin('POST', `/sources/${source.id}/replays`, { ...range, types: ['tracks'] });
    assert.match(badType.body.error.message, /types: "tracks" is not one of/);
    // A replay runs until its `to` has passed: one far ahead would follow live traffic for as long.
    const hours = (n: number): string => new Date(Date.now() + n * 3_600_000).toISOString();
    const farAhead = await sy.admin('POST', `/sources/${source.id}/replays`, { from: range.from, to: hours(25) });
    assert.equal(farAhead.status, 400, JSON.stringify(farAhead.body));
    assert.equal(farAhead.body.error.code, 'invalid_request');
    assert.match(farAhead.body.error.message, /^to must be at most 24 hours ahead of the server's time \(\d{4}-\d\d-\d\dT[\d:.]+Z\): a replay runs until its to has passed$/);
    const dayAhead = await sy.admin('POST', `/sources/${source.id}/replays`, { from: range.from, to: hours(23.9) });
    assert.equal(dayAhead.status, 201, JSON.stringify(dayAhead.body));
    assert.equal((await sy.admin('POST', `/replays/${dayAhead.body.id}/cancel`)).body.status, 'cancelled');
    const bare = await sy.createSource('no-destination');
    assert.equal((await sy.admin('POST', `/sources/${bare.id}/replays`, range)).status, 404);
    assert.equal((await sy.admin('GET', '/replays/rpl_nope')).status, 404);
  });
});
