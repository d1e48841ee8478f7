import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RegulationType } from '../../src/domain/regulation.js';
import type { IngestEntry, NewRegulation, SourceRecord, Store } from '../../src/store/store.js';

/**
 * The Store contract of the debugger's paging and of regulations (deletion
 * and suppression requests): one suite every adapter runs, like
 * store-contract.ts. `open` gives a fresh, migrated, empty store.
 */
export function describeRegulationsContract(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  void describe(`Store contract, debugger and regulations: ${name}`, () => {
    let base: Store;
    let cleanup: () => Promise<void>;
    let counter = 0;
    const T0 = 1_700_000_000_000;

    before(async () => {
      ({ store: base, cleanup } = await open());
    });
    after(async () => {
      await cleanup();
    });

    const test = (title: string, body: (store: Store) => Promise<void>): void => {
      void it(title, () => body(base));
    };

    const newSource = async (store: Store): Promise<SourceRecord> => {
      counter++;
      const source: SourceRecord = {
        id: `src_reg_${counter}`,
        name: `source ${counter}`,
        writeKey: `key_reg_${counter}_${Math.random()}`,
        enabled: true,
        createdAt: T0,
        updatedAt: T0,
      };
      await store.insertSource(source);
      return source;
    };
    const entry = (sourceId: string, userId: string | undefined, overrides: Partial<IngestEntry> = {}): IngestEntry => {
      counter++;
      return {
        sourceId,
        status: 'accepted',
        type: 'track',
        messageId: `reg-msg-${counter}`,
        userId,
        receivedAt: T0,
        body: JSON.stringify({ type: 'track', event: 'E', userId, n: counter }),
        destinations: ['webhooks'],
        ...overrides,
      };
    };
    const regulation = (type: RegulationType, subjectIds: string[], stepSourceIds: string[], more: Partial<NewRegulation> = {}): NewRegulation => {
      counter++;
      return { id: `reg_contract_${counter}`, regulationType: type, subjectIds, sourceIds: undefined, stepSourceIds, createdAt: T0 + counter, ...more };
    };
    const user = (label: string): string => `user-${label}-${++counter}`;

    test('lists a source\'s messages after a seq, oldest first, counts them, and tells the highest seq', async (store) => {
      const a = await newSource(store);
      const b = await newSource(store);
      const results = await store.appendMessages(
        [entry(a.id, 'u'), entry(b.id, 'u'), entry(a.id, 'u'), entry(a.id, 'u', { status: 'rejected', reason: 'r' }), entry(b.id, 'u'), entry(a.id, 'u')],
        0,
      );
      const seqsOfA = [results[0]!.seq, results[2]!.seq, results[3]!.seq, results[5]!.seq];
      assert.deepEqual((await store.listMessagesAfter(a.id, 0, 100)).map((m) => m.seq), seqsOfA);
      assert.deepEqual((await store.listMessagesAfter(a.id, seqsOfA[1]!, 100)).map((m) => m.seq), seqsOfA.slice(2));
      assert.deepEqual((await store.listMessagesAfter(a.id, 0, 2)).map((m) => m.seq), seqsOfA.slice(0, 2));
      assert.deepEqual(await store.listMessagesAfter(a.id, seqsOfA[3]!, 100), []);
      assert.deepEqual((await store.listMessagesAfter(a.id, 0, 100, seqsOfA[2])).map((m) => m.seq), seqsOfA.slice(0, 3), 'no further than uptoSeq');
      const rejected = (await store.listMessagesAfter(a.id, seqsOfA[1]!, 1))[0];
      assert.equal(rejected?.status, 'rejected');
      assert.equal(rejected?.reason, 'r');

      assert.equal(await store.countMessages(a.id, 0), 4);
      assert.equal(await store.countMessages(a.id, seqsOfA[0]!), 3);
      assert.equal(await store.countMessages(a.id, seqsOfA[0]!, seqsOfA[3]), 2, 'both bounds are exclusive');
      assert.equal(await store.countMessages(b.id, 0), 2);
      assert.equal(await store.highestMessageSeq(), results[5]!.seq, 'the highest seq of any source');
    });

    test('creates a deleting regulation with a pending row per affected source', async (store) => {
      const [a, b] = [await newSource(store), await newSource(store)];
      const created = regulation('DELETE_ONLY', ['u2', 'u1'], [b.id, a.id]);
      await store.createRegulation(created);
      const detail = await store.getRegulation(created.id);
      assert.deepEqual(detail, {
        id: created.id,
        regulationType: 'DELETE_ONLY',
        subjectIds: ['u2', 'u1'],
        subjectCount: 2,
        sourceIds: undefined,
        status: 'INITIALIZED',
        createdAt: created.createdAt,
        updatedAt: created.createdAt,
        sources: [a.id, b.id].sort().map((sourceId) => ({ sourceId, status: 'PENDING', error: undefined, updatedAt: created.createdAt })),
        sourceCounts: { total: 2, pending: 2, failed: 0 },
        rawSeqMark: 0,
      });
      const pending = (await store.listPendingRegulationSteps(1000)).filter((s) => s.regulationId === created.id);
      assert.deepEqual(pending.map((s) => s.sourceId).sort(), [a.id, b.id].sort());
      assert.equal(await store.getRegulation('reg_absent'), undefined);
      await assert.rejects(store.createRegulation(created), 'a second request with the same id');

      const named = regulation('SUPPRESS_WITH_DELETE', ['u'], [a.id], { sourceIds: [a.id] });
      await store.createRegulation(named);
      assert.deepEqual((await store.getRegulation(named.id))?.sourceIds, [a.id]);

      const nothingToDo = regulation('DELETE_ONLY', ['u'], []);
      await store.createRegulation(nothingToDo);
      assert.equal((await store.getRegulation(nothingToDo.id))?.status, 'FINISHED', 'no affected source: nothing to run');
    });

    test('runs a step once: erases the users\' messages with their deliveries, stores the delete messages', async (store) => {
      const [a, b] = [await newSource(store), await newSource(store)];
      const [gone, stays] = [user('gone'), user('stays')];
      const earlierDelete = entry(a.id, gone, { type: 'delete', body: JSON.stringify({ type: 'delete', userId: gone }) });
      const othersMessage = entry(a.id, stays);
      const seeded = await store.appendMessages(
        [
          entry(a.id, gone),
          entry(a.id, gone),
          entry(a.id, gone, { status: 'rejected', reason: 'r', destinations: [] }),
          othersMessage,
          entry(b.id, gone),
          earlierDelete,
        ],
        0,
      );
      // One of the erased messages was delivered already, with an attempt.
      const jobs = await store.listDeliveries({ sourceId: a.id, limit: 100 });
      const delivered = jobs.find((d) => d.messageSeq === seeded[0]!.seq)!;
      const claimed = await store.claimDeliveries({ owner: 'w', limit: 1000, leaseMs: 1000, now: T0 });
      assert.ok(claimed.some((c) => c.id === delivered.id));
      await store.finishDeliveries([
        { kind: 'succeeded', id: delivered.id, owner: 'w', at: T0, firstAttemptAt: T0, attempts: [{ at: T0, url: 'http://r/', statusCode: 200, durationMs: 1 }] },
      ]);

      const created = regulation('DELETE_ONLY', [gone], [a.id, b.id]);
      await store.createRegulation(created);
      const deleteMessage = entry(a.id, gone, { type: 'delete', body: JSON.stringify({ type: 'delete', userId: gone, n: 'new' }) });
      const at = T0 + 5_000;
      const topics: string[] = [];
      const unsubscribe = store.subscribe((topic) => topics.push(topic));
      try {
        assert.equal(await store.runRegulationStep({ regulationId: created.id, sourceId: a.id, eraseUserIds: [gone], messages: [deleteMessage], at }), true);
      } finally {
        unsubscribe();
      }
      assert.ok(topics.includes('messages'), `notified ${topics.join(', ')}`);
      assert.ok(topics.includes('deliveries'), `notified ${topics.join(', ')}`);

      const left = await store.listMessagesAfter(a.id, 0, 100);
      assert.deepEqual(
        left.map((m) => [m.userId, m.type, m.body]),
        [
          [stays, 'track', othersMessage.body],
          [gone, 'delete', earlierDelete.body],
          [gone, 'delete', deleteMessage.body],
        ],
      );
      const stored = left[2]!;
      assert.equal(stored.status, 'accepted');
      assert.equal(stored.messageId, deleteMessage.messageId);
      assert.equal(stored.receivedAt, deleteMessage.receivedAt);

      assert.equal(await store.getDelivery(delivered.id), undefined, 'a finished delivery of an erased message goes too');
      const deliveriesLeft = await store.listDeliveries({ sourceId: a.id, limit: 100 });
      assert.deepEqual(
        deliveriesLeft.map((d) => d.messageSeq).sort((x, y) => x - y),
        [seeded[3]!.seq, seeded[5]!.seq, stored.seq],
        'the other user\'s, the earlier delete\'s and the new delete\'s deliveries',
      );
      const job = deliveriesLeft.find((d) => d.messageSeq === stored.seq)!;
      assert.equal(job.status, 'pending');
      assert.equal(job.destination, 'webhooks');
      assert.equal((await store.listMessagesAfter(b.id, 0, 100)).length, 1, 'the other source is not touched yet');

      let detail = await store.getRegulation(created.id);
      assert.equal(detail?.status, 'RUNNING');
      assert.deepEqual(detail?.sources.find((s) => s.sourceId === a.id), { sourceId: a.id, status: 'FINISHED', error: undefined, updatedAt: at });
      assert.ok(!(await store.listPendingRegulationSteps(1000)).some((s) => s.regulationId === created.id && s.sourceId === a.id));

      assert.equal(
        await store.runRegulationStep({ regulationId: created.id, sourceId: a.id, eraseUserIds: [gone], messages: [entry(a.id, gone, { type: 'delete' })], at }),
        false,
        'a step runs once',
      );
      assert.equal((await store.listMessagesAfter(a.id, 0, 100)).length, 3, 'and the second call writes nothing');

      assert.equal(await store.runRegulationStep({ regulationId: created.id, sourceId: b.id, eraseUserIds: [gone], messages: [], at: at + 1 }), true);
      assert.deepEqual(await store.listMessagesAfter(b.id, 0, 100), []);
      detail = await store.getRegulation(created.id);
      assert.equal(detail?.status, 'FINISHED');
      assert.equal(detail?.updatedAt, at + 1);
    });

    test('runs a step exactly once when several calls race', async (store) => {
      const a = await newSource(store);
      const created = regulation('SUPPRESS_WITH_DELETE', ['racer'], [a.id]);
      await store.createRegulation(created);
      const runs = await Promise.all(
        [1, 2, 3].map(() =>
          store.runRegulationStep({ regulationId: created.id, sourceId: a.id, eraseUserIds: ['racer'], messages: [entry(a.id, 'racer', { type: 'delete' })], at: T0 }),
        ),
      );
      assert.deepEqual(runs.filter(Boolean).length, 1);
      assert.equal((await store.listMessagesAfter(a.id, 0, 100)).length, 1, 'one delete message');
      assert.equal((await store.listDeliveries({ sourceId: a.id, limit: 100 })).length, 1);
    });

    test('fails a step, and the regulation once no step is pending', async (store) => {
      const [a, b] = [await newSource(store), await newSource(store)];
      const created = regulation('DELETE_ONLY', ['u'], [a.id, b.id]);
      await store.createRegulation(created);
      assert.equal(await store.failRegulationStep({ regulationId: created.id, sourceId: a.id }, 'boom', T0 + 10), true);
      assert.equal((await store.getRegulation(created.id))?.status, 'RUNNING');
      assert.equal(await store.failRegulationStep({ regulationId: created.id, sourceId: a.id }, 'again', T0 + 11), false);
      assert.equal(await store.runRegulationStep({ regulationId: created.id, sourceId: a.id, eraseUserIds: ['u'], messages: [], at: T0 }), false);
      assert.equal(await store.runRegulationStep({ regulationId: created.id, sourceId: b.id, eraseUserIds: ['u'], messages: [], at: T0 + 12 }), true);
      const detail = await store.getRegulation(created.id);
      assert.equal(detail?.status, 'FAILED');
      assert.deepEqual(
        detail?.sources.map((s) => [s.sourceId, s.status, s.error, s.updatedAt]),
        [
          [a.id, 'FAILED', 'boom', T0 + 10],
          [b.id, 'FINISHED', undefined, T0 + 12],
        ].sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
      );
      assert.equal(await store.failRegulationStep({ regulationId: 'reg_absent', sourceId: a.id }, 'x', T0), false);
    });

    test('suppresses and unsuppresses users, for every source or some, bumping the config version', async (store) => {
      const [a, b] = [await newSource(store), await newSource(store)];
      const [x, y] = [user('x'), user('y')];
      const mine = async (): Promise<string[]> =>
        (await store.listSuppressions())
          .filter((s) => s.userId === x || s.userId === y)
          .map((s) => `${s.userId === x ? 'x' : 'y'}@${s.sourceId === undefined ? 'all' : s.sourceId === a.id ? 'a' : 'b'}:${s.regulationId}`)
          .sort();

      const v0 = await store.getConfigVersion();
      const topics: string[] = [];
      const unsubscribe = store.subscribe((topic) => topics.push(topic));
      const r1 = regulation('SUPPRESS_ONLY', [x, y], [a.id, b.id]);
      try {
        await store.createRegulation(r1);
      } finally {
        unsubscribe();
      }
      assert.ok((await store.getConfigVersion()) > v0, 'caches of every node reload');
      assert.ok(topics.includes('config'));
      const detail = await store.getRegulation(r1.id);
      assert.equal(detail?.status, 'FINISHED');
      assert.deepEqual(detail?.sources.map((s) => s.status), ['FINISHED', 'FINISHED']);
      assert.deepEqual(await mine(), [`x@all:${r1.id}`, `y@all:${r1.id}`]);
      const record = (await store.listSuppressions()).find((s) => s.userId === x)!;
      assert.equal(record.createdAt, r1.createdAt);

      const r2 = regulation('SUPPRESS_WITH_DELETE', [x], [a.id], { sourceIds: [a.id] });
      await store.createRegulation(r2);
      assert.equal((await store.getRegulation(r2.id))?.status, 'INITIALIZED');
      const r3 = regulation('SUPPRESS_ONLY', [y], [a.id, b.id]);
      await store.createRegulation(r3);
      assert.deepEqual(await mine(), [`x@a:${r2.id}`, `x@all:${r1.id}`, `y@all:${r3.id}`].sort(), 'a newer suppression names its request');

      const v1 = await store.getConfigVersion();
      await store.createRegulation(regulation('UNSUPPRESS', [x], [a.id], { sourceIds: [a.id] }));
      assert.ok((await store.getConfigVersion()) > v1);
      assert.deepEqual(await mine(), [`x@all:${r1.id}`, `y@all:${r3.id}`], 'naming a source lifts only that source\'s suppression');

      const r5 = regulation('UNSUPPRESS', [x, y], [a.id, b.id]);
      await store.createRegulation(r5);
      assert.deepEqual(await mine(), []);
      assert.equal((await store.getRegulation(r5.id))?.status, 'FINISHED');
    });

    test('counts the suppressions in force of some users, no further than asked', async (store) => {
      const [a, b] = [await newSource(store), await newSource(store)];
      const [x, y, z] = [user('x'), user('y'), user('z')];
      await store.createRegulation(regulation('SUPPRESS_ONLY', [x, y], [a.id, b.id]));
      await store.createRegulation(regulation('SUPPRESS_ONLY', [x, y, z], [a.id, b.id], { sourceIds: [a.id, b.id] }));
      await store.createRegulation(regulation('UNSUPPRESS', [y], [b.id], { sourceIds: [b.id] }));
      // x: every source, a, b; y: every source, a (b lifted); z: a, b.
      assert.equal(await store.countSuppressionsInForce([x, y, z], 100), 7);
      assert.equal(await store.countSuppressionsInForce([y], 100), 2, 'lifted rows do not count');
      assert.equal(await store.countSuppressionsInForce([x, y, z], 5), 5, 'stops at atMost');
      assert.equal(await store.countSuppressionsInForce([user('nobody')], 100), 0);
    });

    test('lists the suppression rows changed after a seq, lifts included, and nothing for other config changes', async (store) => {
      const [a, b] = [await newSource(store), await newSource(store)];
      const [x, y] = [user('x'), user('y')];
      const everything = async (): Promise<number> => {
        const all = await store.listSuppressionChanges(0, 1_000_000);
        assert.deepEqual(all.map((c) => c.seq), [...all.map((c) => c.seq)].sort((p, q) => p - q), 'in seq order');
        assert.equal(new Set(all.map((c) => c.seq)).size, all.length, 'one seq per row');
        return all.length === 0 ? 0 : all[all.length - 1]!.seq;
      };
      const since = async (seq: number) =>
        (await store.listSuppressionChanges(seq, 100)).map((c) => `${c.userId === x ? 'x' : 'y'}@${c.sourceId === undefined ? 'all' : c.sourceId === a.id ? 'a' : 'b'}:${c.lifted ? 'lifted' : 'in force'}:${c.regulationId}`);

      const s0 = await everything();
      const r1 = regulation('SUPPRESS_ONLY', [x, y], [a.id, b.id]);
      await store.createRegulation(r1);
      assert.deepEqual((await since(s0)).sort(), [`x@all:in force:${r1.id}`, `y@all:in force:${r1.id}`]);
      const s1 = await everything();
      assert.deepEqual(await since(s1), [], 'nothing after the highest seq');

      await store.updateSource(a.id, { name: 'renamed' }, T0);
      await store.createRegulation(regulation('DELETE_ONLY', [x], [a.id]));
      assert.deepEqual(await since(s1), [], 'a source renamed, a deletion: no suppression row changes');

      const r2 = regulation('SUPPRESS_ONLY', [x], [a.id], { sourceIds: [a.id] });
      await store.createRegulation(r2);
      assert.deepEqual(await since(s1), [`x@a:in force:${r2.id}`], 'one new suppressed user: one row');
      const s2 = await everything();

      const lift = regulation('UNSUPPRESS', [x], [a.id, b.id]);
      await store.createRegulation(lift);
      assert.deepEqual((await since(s2)).sort(), [`x@a:lifted:${lift.id}`, `x@all:lifted:${lift.id}`], 'a lift shows as lifted rows with new seqs');
      assert.deepEqual(
        (await store.listSuppressions()).filter((s) => s.userId === x || s.userId === y).map((s) => s.userId),
        [y],
        'lifted rows are not in force',
      );
      const s3 = await everything();
      const again = regulation('SUPPRESS_ONLY', [x], [a.id, b.id]);
      await store.createRegulation(again);
      assert.deepEqual(await since(s3), [`x@all:in force:${again.id}`], 'suppressed again: the lifted row is in force again');

      const [first, second] = await store.listSuppressionChanges(s0, 1).then(async (page) => [page, await store.listSuppressionChanges(page[0]!.seq, 1)]);
      assert.equal(first!.length, 1);
      assert.ok(second![0]!.seq > first![0]!.seq, 'pages by seq');
    });

    test('lists regulations newest first, by status, at most the limit, without subject ids', async (store) => {
      const a = await newSource(store);
      const later = T0 + 1_000_000_000;
      const first = regulation('DELETE_ONLY', ['u1', 'u2', 'u3'], [a.id], { createdAt: later });
      const second = regulation('SUPPRESS_ONLY', ['u1'], [a.id], { createdAt: later + 1, sourceIds: [a.id] });
      await store.createRegulation(first);
      await store.createRegulation(second);

      const listed = await store.listRegulations({ limit: 2, sources: 10 });
      assert.deepEqual(listed.map((r) => r.id), [second.id, first.id]);
      assert.equal((listed[1] as { subjectIds?: unknown }).subjectIds, undefined, 'no subject ids in lists');
      assert.equal(listed[1]!.subjectCount, 3);
      assert.deepEqual(listed[1]!.sources, [{ sourceId: a.id, status: 'PENDING', error: undefined, updatedAt: later }]);
      assert.deepEqual(listed[0]!.sourceIds, [a.id]);
      assert.deepEqual((await store.listRegulations({ limit: 1, sources: 10 })).map((r) => r.id), [second.id]);

      const initialized = await store.listRegulations({ status: 'INITIALIZED', limit: 1000, sources: 0 });
      assert.ok(initialized.some((r) => r.id === first.id));
      assert.ok(initialized.every((r) => r.status === 'INITIALIZED'));
      assert.ok((await store.listRegulations({ status: 'FINISHED', limit: 1, sources: 0 })).some((r) => r.id === second.id));
    });

    test('lists each request with its first source rows and all of them counted; pages them reading one', async (store) => {
      const sources = [await newSource(store), await newSource(store), await newSource(store), await newSource(store), await newSource(store)];
      const ids = sources.map((s) => s.id).sort();
      const latest = T0 + 2_000_000_000;
      const deletion = regulation('DELETE_ONLY', ['u1'], ids, { createdAt: latest });
      await store.createRegulation(deletion);
      const suppression = regulation('SUPPRESS_ONLY', ['u1'], ids, { createdAt: latest + 1 });
      await store.createRegulation(suppression);

      const [suppressed, deleting] = await store.listRegulations({ limit: 2, sources: 2 });
      assert.deepEqual(deleting!.sources.map((s) => s.sourceId), ids.slice(0, 2), 'the first by source id');
      assert.deepEqual(deleting!.sourceCounts, { total: 5, pending: 5, failed: 0 });
      assert.deepEqual(suppressed!.sourceCounts, { total: 5, pending: 0, failed: 0 });
      assert.deepEqual((await store.listRegulations({ limit: 1, sources: 0 }))[0]!.sources, []);

      assert.equal(await store.runRegulationStep({ regulationId: deletion.id, sourceId: ids[4]!, eraseUserIds: ['u1'], messages: [], at: latest + 5 }), true);
      assert.equal(await store.failRegulationStep({ regulationId: deletion.id, sourceId: ids[0]!, }, 'boom', latest + 6), true);
      const counted = (await store.listRegulations({ limit: 2, sources: 1 })).find((r) => r.id === deletion.id)!;
      assert.deepEqual(counted.sourceCounts, { total: 5, pending: 3, failed: 1 }, 'kept as steps end');
      assert.equal(counted.status, 'RUNNING');
      assert.deepEqual(counted.sources.map((s) => [s.sourceId, s.status]), [[ids[0], 'FAILED']]);

      const all = await store.getRegulation(deletion.id);
      assert.deepEqual(all?.sources.map((s) => s.sourceId), ids, 'every source without a page');
      assert.deepEqual(all?.sourceCounts, counted.sourceCounts);
      const page = await store.getRegulation(deletion.id, { after: ids[1], limit: 2 });
      assert.deepEqual(page?.sources.map((s) => s.sourceId), ids.slice(2, 4));
      assert.deepEqual(page?.subjectIds, ['u1']);
      assert.deepEqual((await store.getRegulation(deletion.id, { limit: 1 }))?.sources.map((s) => s.sourceId), [ids[0]]);
    });

    test('records the highest unprocessed raw seq when stored, whatever the clocks say', async (store) => {
      const source = await newSource(store);
      // Received by a node whose clock runs ten minutes ahead of the one that stores the deletion.
      const raw = (userId: string) => ({
        sourceId: source.id, route: 'track', receivedAt: T0 + 10 * 60_000, ip: undefined, configVersion: 1, messageCount: 1, headers: undefined, body: JSON.stringify({ userId }),
      });
      const build = (rows: readonly { body: string; receivedAt: number }[]) =>
        rows.map((row) => [entry(source.id, (JSON.parse(row.body) as { userId: string }).userId, { receivedAt: row.receivedAt, body: row.body, destinations: [] })]);
      await store.appendRawRequests([raw('before-1'), raw('before-2')]);
      const highest = await store.highestRawSeq();
      const deletion = regulation('DELETE_ONLY', ['before-1'], [source.id], { createdAt: T0 });
      await store.createRegulation(deletion);
      await store.appendRawRequests([raw('after')]);
      assert.equal((await store.getRegulation(deletion.id))?.rawSeqMark, highest, 'the highest raw seq when stored, not a time');
      assert.equal(await store.hasRawRequestsUpTo(highest), true, 'the deletion waits for the two before it');
      assert.equal((await store.processRawRequests({ maxRequests: 2, maxMessages: 10 }, build, 0)).requests, 2);
      assert.equal(await store.hasRawRequestsUpTo(highest), false, 'and not for the one after it');
      assert.equal((await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0)).requests, 1);

      const idle = regulation('DELETE_ONLY', ['before-1'], [source.id], { createdAt: T0 });
      await store.createRegulation(idle);
      assert.equal((await store.getRegulation(idle.id))?.rawSeqMark, 0, 'nothing unprocessed: nothing to wait for');
    });
  });
}
