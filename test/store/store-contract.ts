import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { IngestEntry, SourceRecord, Store } from '../../src/store/store.js';

/**
 * The Store contract: one suite every adapter runs (see sqlite-store.test.ts,
 * postgres-store.test.ts). `open` gives a fresh, migrated, empty store.
 * A case only some adapters can pass must be skipped by name with the reason.
 */
export function describeStoreContract(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  describe(`Store contract: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    let counter = 0;
    const T0 = 1_700_000_000_000;

    before(async () => {
      ({ store, cleanup } = await open());
    });
    after(async () => {
      await cleanup();
    });

    const newSource = async (overrides: Partial<SourceRecord> = {}): Promise<SourceRecord> => {
      counter++;
      const source: SourceRecord = {
        id: `src_contract_${counter}`,
        name: `source ${counter}`,
        writeKey: `key_contract_${counter}_${Math.random()}`,
        enabled: true,
        createdAt: T0 + counter,
        updatedAt: T0 + counter,
        ...overrides,
      };
      await store.insertSource(source);
      return source;
    };
    const entry = (sourceId: string, overrides: Partial<IngestEntry> = {}): IngestEntry => {
      counter++;
      return {
        sourceId,
        status: 'accepted',
        type: 'track',
        messageId: `msg-${counter}`,
        userId: 'user-1',
        receivedAt: T0,
        body: JSON.stringify({ type: 'track', event: 'E', n: counter }),
        destinations: ['webhooks'],
        ...overrides,
      };
    };

    it('migrates again without harm', async () => {
      await store.migrate();
      await store.ping();
    });

    it('stores a setting only once', async () => {
      assert.equal(await store.insertSettingIfAbsent('contract.k', 'first'), true);
      assert.equal(await store.insertSettingIfAbsent('contract.k', 'second'), false);
      assert.equal(await store.getSetting('contract.k'), 'first');
      assert.equal(await store.getSetting('contract.absent'), undefined);
    });

    it('bumps the config version on every source and destination change', async () => {
      const v0 = await store.getConfigVersion();
      const source = await newSource();
      const v1 = await store.getConfigVersion();
      assert.ok(v1 > v0);
      await store.updateSource(source.id, { name: 'renamed' }, T0 + 5);
      const v2 = await store.getConfigVersion();
      assert.ok(v2 > v1);
      await store.putDestination({ sourceId: source.id, kind: 'webhooks', enabled: true, settings: { webhooks: [] }, updatedAt: T0 });
      assert.ok((await store.getConfigVersion()) > v2);
    });

    it('creates, reads, updates and deletes sources with their data', async () => {
      const source = await newSource({ name: 'crud' });
      assert.deepEqual(await store.getSource(source.id), source);
      assert.ok((await store.listSources()).some((s) => s.id === source.id));

      const updated = await store.updateSource(source.id, { enabled: false }, T0 + 99);
      assert.equal(updated?.enabled, false);
      assert.equal(updated?.name, 'crud');
      assert.equal(updated?.updatedAt, T0 + 99);
      assert.equal(await store.updateSource('src_absent', { name: 'x' }, T0), undefined);

      await store.putDestination({ sourceId: source.id, kind: 'webhooks', enabled: true, settings: { a: [1] }, updatedAt: T0 });
      assert.deepEqual((await store.getDestination(source.id, 'webhooks'))?.settings, { a: [1] });
      await store.appendMessages([entry(source.id)], 0);

      assert.equal(await store.deleteSource(source.id), true);
      assert.equal(await store.deleteSource(source.id), false);
      assert.equal(await store.getSource(source.id), undefined);
      assert.equal(await store.getDestination(source.id, 'webhooks'), undefined);
      assert.deepEqual(await store.listRecentMessages(source.id, 10), []);
      assert.deepEqual(await store.listDeliveries({ sourceId: source.id, limit: 10 }), []);
    });

    it('appends messages with statuses, jobs only for accepted ones', async () => {
      const source = await newSource();
      const results = await store.appendMessages(
        [
          entry(source.id),
          entry(source.id, { status: 'rejected', reason: 'track call without event', messageId: undefined }),
          entry(source.id, { status: 'suppressed' }),
          entry(source.id, { destinations: [] }),
        ],
        0,
      );
      assert.deepEqual(results.map((r) => r.status), ['accepted', 'rejected', 'suppressed', 'accepted']);
      assert.ok(results[0]!.seq < results[1]!.seq && results[1]!.seq < results[2]!.seq);
      const deliveries = await store.listDeliveries({ sourceId: source.id, limit: 10 });
      assert.equal(deliveries.length, 1);
      assert.equal(deliveries[0]!.messageSeq, results[0]!.seq);
      assert.equal(deliveries[0]!.status, 'pending');

      const recent = await store.listRecentMessages(source.id, 2);
      assert.deepEqual(recent.map((m) => m.seq), [results[3]!.seq, results[2]!.seq]);
      const rejected = (await store.listRecentMessages(source.id, 10)).find((m) => m.status === 'rejected');
      assert.equal(rejected?.reason, 'track call without event');
    });

    it('de-duplicates messageIds per source within the window', async () => {
      const a = await newSource();
      const b = await newSource();
      const first = entry(a.id, { messageId: 'same-id', receivedAt: T0 });
      assert.equal((await store.appendMessages([first], T0 - 1000))[0]!.status, 'accepted');
      // Again within the window, also twice in one commit.
      const again = await store.appendMessages([{ ...first, receivedAt: T0 + 10 }, { ...first, receivedAt: T0 + 11 }], T0 - 1000);
      assert.deepEqual(again.map((r) => r.status), ['duplicate', 'duplicate']);
      // Another source may use the same id.
      assert.equal((await store.appendMessages([{ ...first, sourceId: b.id }], T0 - 1000))[0]!.status, 'accepted');
      // Once the first sighting is older than the window, it is new again.
      assert.equal((await store.appendMessages([{ ...first, receivedAt: T0 + 5000 }], T0 + 1)).at(0)?.status, 'accepted');
      const jobs = await store.listDeliveries({ sourceId: a.id, limit: 10 });
      assert.equal(jobs.length, 2, 'duplicates create no delivery');
    });

    it('de-duplicates a new messageId seen twice in one commit: accepted, then duplicate', async () => {
      const source = await newSource();
      const first = entry(source.id, { messageId: 'twice-in-one-commit', receivedAt: T0 });
      const results = await store.appendMessages([first, entry(source.id), { ...first, receivedAt: T0 + 1 }], T0 - 1000);
      assert.deepEqual(results.map((r) => r.status), ['accepted', 'accepted', 'duplicate']);
      assert.equal((await store.listDeliveries({ sourceId: source.id, limit: 10 })).length, 2);
    });

    it('stores raw requests, then processes the oldest in one commit with their messages, up to the limits but never none', async () => {
      const source = await newSource();
      const raw = (n: number, messageCount = 1) => ({
        sourceId: source.id, route: 'track', receivedAt: T0 + n, ip: undefined, configVersion: 1, messageCount, headers: undefined, body: JSON.stringify({ n }),
      });
      await store.appendRawRequests([raw(1, 3)]);
      const firstSeq = await store.highestRawSeq();
      await store.appendRawRequests([raw(2), raw(3)]);
      const lastSeq = await store.highestRawSeq();
      assert.ok(firstSeq > 0 && lastSeq >= firstSeq + 2, `${firstSeq} then ${lastSeq}`);
      assert.deepEqual(await store.rawBacklog(), { requests: 3, messages: 5, oldestReceivedAt: T0 + 1 });
      assert.equal(await store.hasRawRequestsUpTo(firstSeq - 1), false);
      assert.equal(await store.hasRawRequestsUpTo(firstSeq), true);

      // A build that throws writes nothing.
      await assert.rejects(store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, () => { throw new Error('no'); }, 0), /no/);
      assert.equal((await store.rawBacklog()).requests, 3);

      // The first request alone is over maxMessages: taken anyway, alone.
      const seen: number[][] = [];
      const build = (rows: readonly { body: string; receivedAt: number }[]) => {
        seen.push(rows.map((row) => (JSON.parse(row.body) as { n: number }).n));
        return rows.map((row) => [entry(source.id, { receivedAt: row.receivedAt, body: row.body })]);
      };
      const first = await store.processRawRequests({ maxRequests: 10, maxMessages: 2 }, build, 0);
      assert.deepEqual([first.requests, first.results.length, first.results[0]?.status], [1, 1, 'accepted']);
      assert.equal(first.caughtUp, false, 'cut short by maxMessages: more are left');
      assert.equal(await store.hasRawRequestsUpTo(firstSeq), false, 'the first is processed');
      assert.equal(await store.hasRawRequestsUpTo(lastSeq), true);
      assert.equal(await store.highestRawSeq(), lastSeq);
      const rest = await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0);
      assert.equal(rest.requests, 2);
      assert.equal(rest.caughtUp, true, 'took every one there was: no need to look again until notified');
      assert.deepEqual(seen, [[1], [2, 3]], 'in seq order, each once');
      assert.equal((await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0)).requests, 0);
      assert.deepEqual(await store.rawBacklog(), { requests: 0, messages: 0, oldestReceivedAt: undefined });
      assert.equal((await store.listRecentMessages(source.id, 10)).length, 3);
      assert.equal(await store.highestRawSeq(), 0, 'none left');

      // Processing emptied the table: the next request's seq is still above every seq before.
      await store.appendRawRequests([raw(4)]);
      assert.ok((await store.highestRawSeq()) > lastSeq, 'a seq is never handed out twice');
      assert.equal(await store.hasRawRequestsUpTo(lastSeq), false);
      assert.equal((await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0)).requests, 1);
    });

    it('stores no message of a source deleted while its raw requests were being built', async () => {
      // On the embedded store the batch is read and built before the write
      // lock is taken; the deletion commits in between.
      const kept = await newSource();
      const deleted = await newSource();
      const raw = (sourceId: string, n: number) => ({
        sourceId, route: 'track', receivedAt: T0 + n, ip: undefined, configVersion: 1, messageCount: 1, headers: undefined, body: JSON.stringify({ n }),
      });
      await store.appendRawRequests([raw(kept.id, 1), raw(deleted.id, 2), raw(kept.id, 3)]);
      let deletion: Promise<boolean> | undefined;
      const build = (rows: readonly { sourceId: string; body: string; receivedAt: number }[]) => {
        deletion ??= store.deleteSource(deleted.id);
        return rows.map((row) => [entry(row.sourceId, { receivedAt: row.receivedAt, body: row.body })]);
      };
      await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0);
      assert.equal(await deletion, true);
      while ((await store.processRawRequests({ maxRequests: 10, maxMessages: 10 }, build, 0)).requests > 0);
      assert.deepEqual(await store.listRecentMessages(deleted.id, 10), []);
      assert.deepEqual((await store.listRecentMessages(kept.id, 10)).map((m) => m.body).sort(), [JSON.stringify({ n: 1 }), JSON.stringify({ n: 3 })]);
      assert.deepEqual(await store.rawBacklog(), { requests: 0, messages: 0, oldestReceivedAt: undefined });
    });

    it('leases due deliveries, and gives them out again once the lease expires', async () => {
      const source = await newSource();
      await store.appendMessages([entry(source.id, { receivedAt: T0 }), entry(source.id, { receivedAt: T0 })], 0);
      const mine = (claimed: Awaited<ReturnType<Store['claimDeliveries']>>): typeof claimed => claimed.filter((c) => c.sourceId === source.id);

      const first = mine(await store.claimDeliveries({ owner: 'w1', limit: 1000, leaseMs: 1000, now: T0 }));
      assert.equal(first.length, 2);
      assert.equal(first[0]!.attemptCount, 0);
      assert.equal(first[0]!.firstAttemptAt, undefined);
      assert.equal(first[0]!.retryUrls, undefined);
      assert.match(first[0]!.body, /"type":"track"/);

      assert.equal(mine(await store.claimDeliveries({ owner: 'w2', limit: 1000, leaseMs: 1000, now: T0 + 999 })).length, 0);
      const taken = mine(await store.claimDeliveries({ owner: 'w2', limit: 1000, leaseMs: 1000, now: T0 + 1000 }));
      assert.equal(taken.length, 2, 'expired leases are claimable');

      // w1's late outcome is ignored; w2's counts.
      const at = T0 + 1500;
      await store.finishDeliveries([
        { kind: 'succeeded', id: first[0]!.id, owner: 'w1', at, firstAttemptAt: at, attempts: [{ at, url: 'http://a', statusCode: 200, durationMs: 3 }] },
      ]);
      let detail = await store.getDelivery(first[0]!.id);
      assert.equal(detail?.status, 'pending');
      assert.equal(detail?.attempts.length, 0);

      await store.finishDeliveries([
        { kind: 'succeeded', id: first[0]!.id, owner: 'w2', at, firstAttemptAt: at, attempts: [{ at, url: 'http://a', statusCode: 200, durationMs: 3 }] },
        {
          kind: 'retry',
          id: first[1]!.id,
          owner: 'w2',
          at,
          firstAttemptAt: at,
          nextAttemptAt: at + 500,
          retryUrls: ['http://b'],
          lastError: 'HTTP 503',
          attempts: [
            { at, url: 'http://a', statusCode: 404, durationMs: 2 },
            { at, url: 'http://b', statusCode: 503, durationMs: 2 },
          ],
        },
      ]);
      detail = await store.getDelivery(first[0]!.id);
      assert.equal(detail?.status, 'succeeded');
      assert.equal(detail?.attemptCount, 1);
      assert.deepEqual(detail?.attempts, [{ at, url: 'http://a', statusCode: 200, error: undefined, durationMs: 3 }]);

      const retry = await store.getDelivery(first[1]!.id);
      assert.equal(retry?.status, 'pending');
      assert.equal(retry?.lastError, 'HTTP 503');
      assert.equal(retry?.attempts.length, 2);
      assert.equal(mine(await store.claimDeliveries({ owner: 'w3', limit: 1000, leaseMs: 1000, now: at + 499 })).length, 0);
      const again = mine(await store.claimDeliveries({ owner: 'w3', limit: 1000, leaseMs: 1000, now: at + 500 }));
      assert.equal(again.length, 1);
      assert.deepEqual(again[0]!.retryUrls, ['http://b']);
      assert.equal(again[0]!.attemptCount, 1);
      assert.equal(again[0]!.firstAttemptAt, at);

      // Deferred: no attempt counted.
      await store.finishDeliveries([{ kind: 'deferred', id: again[0]!.id, owner: 'w3', at: at + 600, nextAttemptAt: at + 700 }]);
      const deferred = await store.getDelivery(again[0]!.id);
      assert.equal(deferred?.attemptCount, 1);
      assert.equal(deferred?.nextAttemptAt, at + 700);
    });

    it('keeps failed deliveries and requeues them by id, source or time', async () => {
      const source = await newSource();
      await store.appendMessages([entry(source.id), entry(source.id), entry(source.id)], 0);
      const claimed = (await store.claimDeliveries({ owner: 'w', limit: 1000, leaseMs: 1000, now: T0 })).filter((c) => c.sourceId === source.id);
      assert.equal(claimed.length, 3);
      await store.finishDeliveries(
        claimed.map((c, i) => ({ kind: 'failed' as const, id: c.id, owner: 'w', at: T0 + 100 * i, firstAttemptAt: T0, attempts: [], lastError: 'HTTP 404' })),
      );
      const failed = await store.listDeliveries({ sourceId: source.id, status: 'failed', limit: 10 });
      assert.deepEqual(failed.map((d) => d.id), claimed.map((c) => c.id).reverse(), 'newest first');

      assert.equal(await store.requeueFailedDeliveries({ id: claimed[0]!.id }, T0 + 1000), 1);
      assert.equal(await store.requeueFailedDeliveries({ sourceId: source.id, since: T0 + 200 }, T0 + 1000), 1);
      assert.equal(await store.requeueFailedDeliveries({ sourceId: source.id }, T0 + 1000), 1);
      assert.equal(await store.requeueFailedDeliveries({ sourceId: source.id }, T0 + 1000), 0);
      const requeued = await store.getDelivery(claimed[1]!.id);
      assert.equal(requeued?.status, 'pending');
      assert.equal(requeued?.firstAttemptAt, undefined, 'a fresh retry window');
      assert.equal(requeued?.nextAttemptAt, T0 + 1000);
    });

    it('tells when the next delivery is due, and notifies of new ones', async () => {
      const source = await newSource();
      const topics: string[] = [];
      const unsubscribe = store.subscribe((topic) => topics.push(topic));
      await store.appendMessages([entry(source.id, { receivedAt: 42 })], 0);
      unsubscribe();
      assert.equal(await store.nextDeliveryDueAt(), 42);
      assert.ok(topics.includes('deliveries'), `got ${topics.join(', ')}`);
      // Leave nothing due for later cases.
      const claimed = await store.claimDeliveries({ owner: 'w', limit: 1000, leaseMs: 1, now: T0 * 2 });
      await store.finishDeliveries(claimed.map((c) => ({ kind: 'succeeded' as const, id: c.id, owner: 'w', at: T0, firstAttemptAt: T0, attempts: [] })));
    });

    it('prunes old messages and finished deliveries, never pending ones', async () => {
      const source = await newSource();
      const [pendingOne, doneOne] = await store.appendMessages([entry(source.id, { receivedAt: 10 }), entry(source.id, { receivedAt: 10 })], 0);
      await store.appendMessages([entry(source.id, { receivedAt: 10, status: 'rejected', destinations: [] })], 0);
      const claimed = (await store.claimDeliveries({ owner: 'w', limit: 1000, leaseMs: 1000, now: T0 * 3 })).filter(
        (c) => c.messageSeq === doneOne!.seq || c.messageSeq === pendingOne!.seq,
      );
      await store.finishDeliveries(
        claimed
          .filter((c) => c.messageSeq === doneOne!.seq)
          .map((c) => ({ kind: 'succeeded' as const, id: c.id, owner: 'w', at: 20, firstAttemptAt: 20, attempts: [{ at: 20, url: 'http://a', statusCode: 200, durationMs: 1 }] })),
      );
      const removed = await store.prune(T0, T0);
      assert.ok(removed >= 3, `removed ${removed}`);
      const left = await store.listRecentMessages(source.id, 10);
      assert.deepEqual(left.map((m) => m.seq), [pendingOne!.seq], 'only the message a pending delivery needs');
      assert.equal((await store.listDeliveries({ sourceId: source.id, limit: 10 })).length, 1);
    });
  });
}
