import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { IngestEntry, SourceRecord, Store } from '../../src/store/store.js';

/** The Store contract of the overview's traffic counters, one suite every adapter runs. `open` gives a fresh, migrated, empty store. */
export function describeTrafficContract(name: string, open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>): void {
  void describe(`Store contract, traffic counters: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    // The start of a minute, so that +59 s is the same minute and +60 s the next.
    const M0 = 1_700_000_040_000;
    const source: SourceRecord = { id: 'src_traffic', name: 'traffic', writeKey: 'key_traffic', enabled: true, createdAt: M0, updatedAt: M0 };
    let n = 0;
    const entry = (receivedAt: number, overrides: Partial<IngestEntry> = {}): IngestEntry => {
      n++;
      return {
        sourceId: source.id,
        status: 'accepted',
        type: 'track',
        messageId: `traffic-${n}`,
        userId: 'u',
        receivedAt,
        body: JSON.stringify({ type: 'track', event: 'E', n }),
        destinations: ['webhooks'],
        ...overrides,
      };
    };
    const counts = async (since: number): Promise<Record<string, number>> =>
      Object.fromEntries((await store.trafficSince(since)).map((c) => [`${c.minute - M0} ${c.metric} ${c.status}`, c.count]));

    before(async () => {
      ({ store, cleanup } = await open());
      await store.insertSource(source);
    });
    after(async () => {
      await cleanup();
    });

    void it('counts messages per minute by the status they were stored with, duplicates included', async () => {
      const first = entry(M0 + 1_000);
      await store.appendMessages([first, entry(M0 + 59_000), entry(M0 + 2_000, { status: 'rejected', reason: 'bad', messageId: undefined })], M0 - 1);
      await store.appendMessages([{ ...first, receivedAt: M0 + 60_500 }, entry(M0 + 61_000)], M0 - 1);
      assert.deepEqual(await counts(M0), {
        '0 messages accepted': 2,
        '0 messages rejected': 1,
        '60000 messages accepted': 1,
        '60000 messages duplicate': 1,
      });
      // `since` inside a minute includes that whole minute; later minutes only from there.
      assert.deepEqual(Object.keys(await counts(M0 + 60_001)).sort(), ['60000 messages accepted', '60000 messages duplicate']);
      assert.deepEqual(await counts(M0 + 120_000), {});
    });

    void it('counts delivery rounds by outcome, only those whose lease still held, not deferred ones', async () => {
      await store.appendMessages([entry(M0 + 120_000)], M0 - 1);
      const claimed = await store.claimDeliveries({ owner: 'w1', limit: 10, leaseMs: 60_000, now: M0 + 120_000 });
      assert.equal(claimed.length, 4, 'one delivery per accepted message');
      const [a, b, c, d] = claimed.map((job) => job.id) as [number, number, number, number];
      const at = M0 + 180_000;
      const attempt = { at, url: 'http://r.example/', statusCode: 200, durationMs: 5 };
      await store.finishDeliveries([
        { kind: 'succeeded', id: a, owner: 'w1', at, firstAttemptAt: at, attempts: [attempt] },
        { kind: 'failed', id: b, owner: 'w1', at: at + 1, firstAttemptAt: at, attempts: [{ ...attempt, statusCode: 400 }] },
        { kind: 'retry', id: c, owner: 'w1', at: at + 2, firstAttemptAt: at, attempts: [{ ...attempt, statusCode: 500 }], nextAttemptAt: at + 10, retryUrls: ['http://r.example/'] },
        { kind: 'deferred', id: d, owner: 'w1', at: at + 3, nextAttemptAt: at + 10 },
        // Another owner's outcome changes nothing and counts nothing.
        { kind: 'succeeded', id: d, owner: 'someone-else', at: at + 4, firstAttemptAt: at, attempts: [attempt] },
      ]);
      assert.deepEqual(await counts(M0 + 180_000), {
        '180000 deliveries succeeded': 1,
        '180000 deliveries failed': 1,
        '180000 deliveries retried': 1,
      });
      // A later round adds to the same minute's counter.
      const again = await store.claimDeliveries({ owner: 'w2', limit: 10, leaseMs: 60_000, now: at + 20 });
      assert.deepEqual(again.map((job) => job.id).sort((x, y) => x - y), [c, d].sort((x, y) => x - y));
      await store.finishDeliveries(again.map((job) => ({ kind: 'succeeded' as const, id: job.id, owner: 'w2', at: at + 30, firstAttemptAt: at, attempts: [attempt] })));
      assert.equal((await counts(M0 + 180_000))['180000 deliveries succeeded'], 3);
    });

    void it('prunes counters of minutes before the retention cut', async () => {
      await store.prune(M0 + 60_000, M0);
      const left = await counts(M0);
      assert.equal(left['0 messages accepted'], undefined);
      assert.equal(left['60000 messages duplicate'], 1);
    });
  });
}
