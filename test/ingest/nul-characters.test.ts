import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describeOnBothStores } from '../helpers/postgres.js';
import { startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * U+0000 in a message. PostgreSQL text cannot hold it, and only some
 * columns replaced it: an event name or a property key with one failed the
 * observed schema's upsert, and a userId with one failed ordered
 * delivery's tail, so the processing transaction failed on every try and
 * no message after it was processed. Ids now carry U+FFFD in its place (in
 * the body too, on both stores), and the observed schema records names and
 * keys the same way.
 */

function describeNul(name: string, flags: () => Record<string, string>): void {
  void describe(`U+0000 in a message: ${name}`, () => {
    let sy: TestSwitchyard;
    before(async () => {
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', ...flags() });
    });
    after(async () => {
      await sy?.close();
    });

    void it('stores ids with U+FFFD in its place, records the shape, and processes the messages after it', async () => {
      const source = await sy.createSource('nul');
      // Ordered: each message's key goes into delivery_tails. The receiver is never reached; only processing matters here.
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: 'http://127.0.0.1:9/x' }], ordering: 'user' } });
      assert.equal(put.status, 200);
      const sent = await sy.send('/v1/batch', source.writeKey, {
        batch: [
          { type: 'track', event: 'E\u0000x', userId: 'u\u0000', messageId: 'nul-user', properties: { 'a\u0000b': 1 } },
          { type: 'identify', anonymousId: 'a\u0000', messageId: 'nul-anonymous', traits: { 'k\u0000': 'v' } },
        ],
      });
      assert.equal(sent.status, 200);
      assert.equal((await sy.send('/v1/track', source.writeKey, { event: 'E', userId: 'after', messageId: 'after' })).status, 200);

      const messages = (await sy.store.listRecentMessages(source.id, 10)).reverse();
      assert.deepEqual(
        messages.map((message) => [message.messageId, message.status, message.userId]),
        [
          ['nul-user', 'accepted', 'u\uFFFD'],
          ['nul-anonymous', 'accepted', undefined],
          ['after', 'accepted', 'after'],
        ],
      );
      const body = JSON.parse(messages[1]!.body) as { anonymousId: string };
      assert.equal(body.anonymousId, 'a\uFFFD', 'the body carries the same id as the columns');
      const shape = await sy.admin('GET', `/sources/${source.id}/schema`);
      assert.equal(shape.status, 200);
      assert.match(JSON.stringify(shape.body), /E\uFFFDx/, 'the event name as recorded');
      assert.match(JSON.stringify(shape.body), /a\uFFFDb/, 'the property key as recorded');
    });

    void it('suppresses a userId holding U+0000 named as it was sent', async () => {
      const source = await sy.createSource('nul-suppressed');
      const created = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['s\u0000'] });
      assert.equal(created.status, 201);
      assert.equal((await sy.send('/v1/track', source.writeKey, { event: 'E', userId: 's\u0000', messageId: 'from-suppressed' })).status, 200);
      const [message] = await sy.store.listRecentMessages(source.id, 1);
      assert.equal(message?.messageId, 'from-suppressed');
      assert.equal(message?.status, 'suppressed');
    });

    void it("finds a profile by an id holding U+0000 named as it was sent, and the profile's events", async () => {
      const source = await sy.createSource('nul-profile');
      const sent = await sy.send('/v1/identify', source.writeKey, { userId: 'p\u0000', anonymousId: 'q\u0000', messageId: 'nul-profile', traits: { plan: 'pro' } });
      assert.equal(sent.status, 200);
      // Engage applies messages after processing: wait for the profile under the id as stored.
      const stored = await eventually(async () => {
        const answer = await sy.admin('GET', `/profiles/${encodeURIComponent('user_id:p\uFFFD')}`);
        return answer.status === 200 ? answer.body : undefined;
      }, 10_000, 'the profile');
      const byUser = `/profiles/${encodeURIComponent('user_id:p\u0000')}`;
      const found = await sy.admin('GET', byUser);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      assert.equal(found.body.id, stored.id);
      assert.deepEqual(found.body.identifiers, ['anonymous_id:q\uFFFD', 'user_id:p\uFFFD'], 'as ingest stores the ids');
      const byAnonymous = await sy.admin('GET', `/profiles/${encodeURIComponent('anonymous_id:q\u0000')}`);
      assert.equal(byAnonymous.status, 200, JSON.stringify(byAnonymous.body));
      assert.equal(byAnonymous.body.id, stored.id);
      const events = await sy.admin('GET', `${byUser}/events`);
      assert.equal(events.status, 200, JSON.stringify(events.body));
      assert.deepEqual(events.body.events.map((event: { message: { messageId?: string } }) => event.message.messageId), ['nul-profile']);
    });

    void it('replays messages stored before ids became U+FFFD, whose bodies still hold U+0000, to an ordered destination, and Engage reads them', async () => {
      const receiver = await startReceiver();
      try {
        const source = await sy.createSource('nul-old');
        const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: receiver.url }], ordering: 'user' } });
        assert.equal(put.status, 200, JSON.stringify(put.body));
        // As an older version stored them: U+0000 in the body (and, on SQLite, in the userId column); no live delivery left.
        const receivedAt = Date.now() - 1_000;
        const old = (messageId: string, ids: Record<string, string>) => ({
          sourceId: source.id,
          status: 'accepted' as const,
          type: 'identify',
          messageId,
          userId: ids['userId'],
          receivedAt,
          body: JSON.stringify({ type: 'identify', ...ids, traits: { plan: 'old' }, messageId, receivedAt: new Date(receivedAt).toISOString() }),
          destinations: [],
        });
        const appended = await sy.store.appendMessages([old('old-anonymous', { anonymousId: 'o\u0000a' }), old('old-user', { userId: 'o\u0000u' })], 0);
        assert.deepEqual(appended.map((result) => result.status), ['accepted', 'accepted']);

        const created = await sy.admin('POST', `/sources/${source.id}/replays`, { from: new Date(receivedAt - 1_000).toISOString(), to: new Date().toISOString() });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const done = await eventually(async () => {
          const { body } = await sy.admin('GET', `/replays/${created.body.id}`);
          return body.status === 'done' ? body : undefined;
        }, 15_000, 'the replay to end');
        assert.deepEqual([done.queued, done.delivered, done.failed], [2, 2, 0]);
        assert.deepEqual(receiver.requests.map((request) => JSON.parse(request.body).messageId).sort(), ['old-anonymous', 'old-user']);

        // Engage keys their profiles as ingest now stores the ids, so the ids as sent find them.
        for (const identifier of ['anonymous_id:o\u0000a', 'user_id:o\u0000u']) {
          await eventually(async () => ((await sy.admin('GET', `/profiles/${encodeURIComponent(identifier)}`)).status === 200 ? true : undefined), 10_000, `the profile of ${JSON.stringify(identifier)}`);
        }
      } finally {
        await receiver.close();
      }
    });
  });
}

await describeOnBothStores('U+0000 in a message', describeNul);
