import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_SUPPRESSION_PAIRS, liftProblem, pairsProblem } from '../../src/domain/regulation.js';
import { describeOnBothStores } from '../helpers/postgres.js';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * A request that names sources keeps one suppression row per subject and
 * source, written in the transaction its 201 waits for. 5,000 ids over 1,000
 * named sources wrote 5,000,000 rows: the POST held SQLite's event loop for
 * 64 s (218 s on PostgreSQL, holding the config lock). Such a request is now
 * refused, naming the figures and what to send instead; requests for every
 * source write one row per subject and stay as they were.
 */

void describe('pairsProblem: the bound on subject × named source pairs', () => {
  void it('lets through what is at the bound and requests that suppress nothing', () => {
    assert.equal(pairsProblem('SUPPRESS_ONLY', MAX_SUPPRESSION_PAIRS, 1), undefined);
    assert.equal(pairsProblem('UNSUPPRESS', 1_000, 5), undefined);
    assert.equal(pairsProblem('DELETE_ONLY', 5_000, 1_000), undefined, 'a deletion runs a step per source, in the background');
  });

  void it('names the figures and what to do instead', () => {
    assert.equal(
      pairsProblem('SUPPRESS_WITH_DELETE', 5_000, 1_000),
      'subjectIds × sourceIds is 5,000 × 1,000 = 5,000,000 subject-source pairs; a request that names sources may suppress at most 5,000: ' +
        'send at most 5 subjectIds a request for these 1,000 sources, or omit sourceIds to suppress on every source (one suppression per user)',
    );
    assert.match(pairsProblem('UNSUPPRESS', 2_501, 2)!, /^subjectIds × sourceIds is 2,501 × 2 = 5,002 subject-source pairs; .* may lift at most 5,000: send at most 2,500 subjectIds .* omit sourceIds to lift all of these users' suppressions$/);
  });
});

void describe('liftProblem: the bound on the rows an UNSUPPRESS of every source lifts', () => {
  void it('lets through what is at the bound, and names the figures past it', () => {
    assert.equal(liftProblem(5_000, MAX_SUPPRESSION_PAIRS), undefined);
    assert.equal(
      liftProblem(5_000, MAX_SUPPRESSION_PAIRS + 1),
      'these 5,000 subjectIds have more than 5,000 suppressions in force (one per user and source named for it, one per user for every source); ' +
        'a request may lift at most 5,000: send fewer subjectIds a request, or name sourceIds',
    );
  });
});

const ids = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

function describePairs(name: string, flags: () => Record<string, string>): void {
  void describe(`regulations bounded by subject × source pairs: ${name}`, () => {
    let sy: TestSwitchyard;
    let sources: Array<{ id: string; writeKey: string }>;
    before(async () => {
      sy = await startTestSwitchyard(flags());
      sources = [];
      for (let i = 0; i < 5; i++) sources.push(await sy.createSource(`pairs ${i}`));
    });
    after(async () => {
      await sy?.close();
    });

    const post = (regulationType: string, subjectIds: string[], sourceIds?: string[]): Promise<{ status: number; body: any }> =>
      sy.admin('POST', '/regulations', { regulationType, subjectType: 'USER_ID', subjectIds, ...(sourceIds !== undefined && { sourceIds }) });
    /** What ingest made of a message of `userId` on the source: `accepted` or `suppressed`. */
    const statusOf = async (source: { id: string; writeKey: string }, userId: string): Promise<string | undefined> => {
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId, event: 'Pairs' })).status, 200);
      return (await sy.store.listRecentMessages(source.id, 1))[0]?.status;
    };
    const last = (): { id: string; writeKey: string } => sources[sources.length - 1]!;

    void it('suppresses at the bound, and refuses one subject more with the figures, writing nothing', async () => {
      const named = sources.map((s) => s.id);
      const atBound = ids('at', MAX_SUPPRESSION_PAIRS / named.length);
      const created = await post('SUPPRESS_ONLY', atBound, named);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.equal(await statusOf(last(), 'at-999'), 'suppressed', 'in force from the answer on');
      const rows = (await sy.store.listSuppressions()).length;
      assert.equal(rows, MAX_SUPPRESSION_PAIRS);

      const before = (await sy.admin('GET', '/regulations?limit=500')).body.regulations.length;
      const over = await post('SUPPRESS_WITH_DELETE', ids('over', atBound.length + 1), named);
      assert.equal(over.status, 400);
      assert.equal(over.body.error.code, 'invalid_request');
      assert.match(over.body.error.message, /^subjectIds × sourceIds is 1,001 × 5 = 5,005 subject-source pairs; .* at most 5,000: send at most 1,000 subjectIds a request for these 5 sources, or omit sourceIds/);
      assert.equal((await sy.admin('GET', '/regulations?limit=500')).body.regulations.length, before, 'no request stored');
      assert.equal((await sy.store.listSuppressions()).length, rows, 'no suppression written');
      assert.equal(await statusOf(last(), 'over-0'), 'accepted');
    });

    void it('refuses a lift over the bound without lifting anything, and lifts at the bound', async () => {
      const named = sources.map((s) => s.id);
      const tooMany = await post('UNSUPPRESS', ids('at', 1_001), named);
      assert.equal(tooMany.status, 400);
      assert.match(tooMany.body.error.message, /may lift at most 5,000: .* omit sourceIds to lift all of these users' suppressions$/);
      assert.equal(await statusOf(last(), 'at-0'), 'suppressed', 'still suppressed');

      assert.equal((await post('UNSUPPRESS', ids('at', 1_000), named)).status, 201);
      assert.equal(await statusOf(last(), 'at-0'), 'accepted');
      assert.equal((await sy.store.listSuppressions()).length, 0);
    });

    void it('refuses an UNSUPPRESS of every source for users with more than 5,000 suppressions in force, and lifts them split', async () => {
      // As older data, or 100s of bounded requests, can leave them: 1,001 users on 5 sources, written through the store.
      const named = sources.map((s) => s.id);
      const many = ids('held', 1_001);
      await sy.store.createRegulation({ id: 'reg_held', regulationType: 'SUPPRESS_ONLY', subjectIds: many, sourceIds: named, stepSourceIds: named, createdAt: Date.now() });
      const inForce = (await sy.store.listSuppressions()).length;
      const refused = await post('UNSUPPRESS', many);
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, 'invalid_request');
      assert.match(refused.body.error.message, /^these 1,001 subjectIds have more than 5,000 suppressions in force .*send fewer subjectIds a request, or name sourceIds$/);
      assert.equal((await sy.store.listSuppressions()).length, inForce, 'nothing lifted');
      assert.equal(await statusOf(last(), 'held-1000'), 'suppressed');

      assert.equal((await post('UNSUPPRESS', many.slice(0, 1_000))).status, 201);
      assert.equal((await post('UNSUPPRESS', many.slice(1_000))).status, 201);
      assert.equal(await statusOf(last(), 'held-1000'), 'accepted');
      assert.equal((await sy.store.listSuppressions()).length, inForce - 5_005);
    });

    void it('takes 5,000 subjects for every source (one row each) and deletions over any number of named sources', async () => {
      const everyone = ids('all', 5_000);
      assert.equal((await post('SUPPRESS_ONLY', everyone)).status, 201);
      const rows = await sy.store.listSuppressions();
      assert.equal(rows.length, 5_000);
      assert.ok(rows.every((row) => row.sourceId === undefined), 'one "every source" row per subject');
      assert.equal(await statusOf(sources[0]!, 'all-4999'), 'suppressed');

      const deletion = await post('DELETE_ONLY', everyone, sources.map((s) => s.id));
      assert.equal(deletion.status, 201, JSON.stringify(deletion.body));
      assert.equal((await sy.store.listSuppressions()).length, 5_000, 'a deletion writes no suppression');
    });
  });
}

await describeOnBothStores('regulations bounded by subject × source pairs', describePairs);
