import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RegulationRunner } from '../../src/regulations/regulation-runner.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { RegulationStepRun, Store } from '../../src/store/store.js';
import { eventually } from '../helpers/switchyard.js';

void describe('regulation runner', () => {
  let store: SqliteStore;
  before(async () => {
    store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
    await store.migrate();
  });
  after(async () => {
    await store.close();
  });

  const source = async (id: string): Promise<void> => {
    await store.insertSource({ id, name: id, writeKey: `key-${id}`, enabled: true, createdAt: 0, updatedAt: 0 });
  };

  void it('marks a source FAILED with its error after three tries, and the request FAILED once the rest is done', async () => {
    await source('src_ok');
    await source('src_broken');
    await store.putDestination({ sourceId: 'src_ok', kind: 'webhooks', enabled: true, settings: { webhooks: [{ url: 'http://127.0.0.1:1/' }] }, updatedAt: 0 });
    await store.createRegulation({ id: 'reg_1', regulationType: 'DELETE_ONLY', subjectIds: ['u'], sourceIds: undefined, stepSourceIds: ['src_broken', 'src_ok'], createdAt: 1 });

    // The store as the runner sees it, with one source's step always failing.
    let brokenTries = 0;
    const failing: Store = Object.create(store, {
      runRegulationStep: {
        value: async (step: RegulationStepRun): Promise<boolean> => {
          if (step.sourceId !== 'src_broken') return store.runRegulationStep(step);
          brokenTries++;
          throw new Error('disk on fire', { cause: new Error('underneath') });
        },
      },
    }) as Store;
    const errors: unknown[] = [];
    const runner = new RegulationRunner({ store: failing, now: () => 1_000, newMessageId: () => 'm-1', pollMs: 10, onError: (e) => errors.push(e) });
    runner.start();
    try {
      const detail = await eventually(async () => {
        const r = await store.getRegulation('reg_1');
        return r?.status === 'FAILED' ? r : undefined;
      });
      assert.deepEqual(
        detail.sources.map((s) => [s.sourceId, s.status, s.error]),
        [
          ['src_broken', 'FAILED', 'disk on fire'],
          ['src_ok', 'FINISHED', undefined],
        ],
      );
      assert.equal(brokenTries, 3);
      assert.equal(errors.length, 3);
      assert.match(String(errors[0]), /regulation reg_1 on source src_broken: try 1 of 3 failed/);
      assert.equal(((errors[0] as Error).cause as Error).message, 'disk on fire', 'the cause is chained');
      const [deleteMessage] = await store.listRecentMessages('src_ok', 10);
      assert.deepEqual(JSON.parse(deleteMessage!.body), { type: 'delete', userId: 'u', timestamp: new Date(1_000).toISOString(), messageId: 'm-1' });
    } finally {
      await runner.stop();
    }
  });
});
