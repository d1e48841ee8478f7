import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describeOnBothStores } from '../helpers/postgres.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * Ids are bounded in bytes of UTF-8, not characters. On PostgreSQL the ids
 * are indexed, and a B-tree entry over ~2,700 bytes is refused: a userId of
 * 1,024 characters outside ASCII (3 bytes each) passed a bound in
 * characters, and the processing transaction that held it failed on every
 * try, so no message after it was ever processed. Such a message is now
 * stored as rejected, and the ones after it go on.
 */

/** `n` CJK characters (3 bytes of UTF-8 each) in no repeating pattern: PostgreSQL compresses a repetitive index entry below its limit. */
function cjk(n: number): string {
  return Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7_919) % 20_000))).join('');
}

function describeLongIds(name: string, flags: () => Record<string, string>): void {
  void describe(`ids over 1,024 bytes: ${name}`, () => {
    let sy: TestSwitchyard;
    before(async () => {
      sy = await startTestSwitchyard(flags());
    });
    after(async () => {
      await sy?.close();
    });

    void it('rejects an id over 1,024 bytes of UTF-8, and processes the messages after it', async () => {
      const source = await sy.createSource('long-ids');
      const track = (messageId: string, userId: string) => ({ type: 'track', event: 'E', userId, messageId });
      const sent = await sy.send('/v1/batch', source.writeKey, {
        batch: [
          track('user-1024-cjk', cjk(1_024)),
          { ...track('', 'u'), messageId: cjk(1_024) },
          { type: 'track', event: 'E', anonymousId: cjk(342), messageId: 'anon-342-cjk' },
          track('user-341-cjk', cjk(341)),
          track('user-1024-ascii', 'a'.repeat(1_024)),
        ],
      });
      assert.equal(sent.status, 200);
      // Processing goes on: a later call becomes a message (send waits for it).
      assert.equal((await sy.send('/v1/track', source.writeKey, track('after', 'u'))).status, 200);

      const messages = (await sy.store.listRecentMessages(source.id, 10)).reverse();
      assert.deepEqual(
        messages.map((message) => [message.status, message.reason]),
        [
          ['rejected', 'userId is longer than 1024 bytes (UTF-8)'],
          ['rejected', 'messageId is longer than 1024 bytes (UTF-8)'],
          ['rejected', 'anonymousId is longer than 1024 bytes (UTF-8)'],
          ['accepted', undefined],
          ['accepted', undefined],
          ['accepted', undefined],
        ],
      );
      assert.deepEqual(
        messages.filter((message) => message.status === 'accepted').map((message) => message.messageId),
        ['user-341-cjk', 'user-1024-ascii', 'after'],
        '1,023 bytes of CJK and 1,024 ASCII characters are within the bound',
      );
    });

    void it('refuses a deletion subject over 1,024 bytes of UTF-8', async () => {
      const refused = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: [cjk(342)] });
      assert.equal(refused.status, 400);
      assert.match(JSON.stringify(refused.body), /subjectIds\[0\] must be a non-empty string of at most 1024 bytes \(UTF-8\)/);
    });

    void it('finds a profile by a userId of 1,024 bytes, and refuses an identifier whose id is longer', async () => {
      const source = await sy.createSource('long-profile');
      const userId = 'p'.repeat(1_024);
      assert.equal((await sy.send('/v1/identify', source.writeKey, { userId, traits: { plan: 'pro' } })).status, 200);
      const found = await eventually(async () => {
        const answer = await sy.admin('GET', `/profiles/user_id:${userId}`);
        return answer.status === 200 ? answer.body : undefined;
      }, 10_000, 'the profile of a userId of 1,024 ASCII characters');
      assert.deepEqual(found.identifiers, [`user_id:${userId}`]);
      const refused = await sy.admin('GET', `/profiles/user_id:${encodeURIComponent(cjk(342))}`);
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, 'invalid_request');
      assert.match(refused.body.error.message, /the id of 1 to 1024 bytes \(UTF-8\)/);
    });
  });
}

await describeOnBothStores('ids over 1,024 bytes', describeLongIds);
