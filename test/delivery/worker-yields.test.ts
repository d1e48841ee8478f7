import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { DeliveryWorker } from '../../src/delivery/delivery-worker.js';
import { webhookDestination } from '../../src/domain/webhook-settings.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { DestinationRecord, Store } from '../../src/store/store.js';
import { T0, addSource, storeEntry } from '../helpers/store-fixtures.js';
import { eventually } from '../helpers/switchyard.js';

const BACKLOG = 3_000;

describe('delivery worker and the event loop', () => {
  it('claims at most once per turn of the event loop when rounds end without I/O', async () => {
    const store = SqliteStore.open({ dataDir: ':memory:', durability: 'process' });
    await store.migrate();
    await addSource(store, 'held');
    // A disabled destination: every round fails at once, without a POST,
    // so nothing but the worker itself ever yields the event loop.
    const destination: DestinationRecord = { sourceId: 'held', kind: 'webhooks', enabled: false, settings: { webhooks: [] }, updatedAt: T0 };
    await store.appendMessages(Array.from({ length: BACKLOG }, () => storeEntry('held', { receivedAt: Date.now() })), 0);

    let claims = 0;
    const counting: Store = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'claimDeliveries') {
          return (...args: Parameters<Store['claimDeliveries']>) => {
            claims++;
            return target.claimDeliveries(...args);
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const worker = new DeliveryWorker({
      store: counting,
      destination: () => webhookDestination(destination),
      settings: loadConfig({}, { SWITCHYARD_DATA_DIR: ':memory:' }),
      logger: pino({ level: 'silent' }),
    });
    try {
      await worker.start();
      const turns: number[] = [];
      for (let turn = 0; turn < 3; turn++) {
        await new Promise((resolve) => setImmediate(resolve));
        turns.push(claims);
      }
      // Before the fix, the first turn came only after every one of the
      // 3,000 deliveries had been claimed (12 claims of 256 in one chain).
      assert.ok(turns[0]! <= 2, `claims before the first turn of the event loop: ${turns.join(', ')}`);
      assert.ok(turns[2]! - turns[1]! <= 2, `claims in one turn: ${turns.join(', ')}`);
      await eventually(async () => {
        const failed = await store.listDeliveries({ sourceId: 'held', status: 'failed', limit: BACKLOG });
        return failed.length === BACKLOG ? failed : undefined;
      }, 20_000, 'every delivery to be recorded as failed');
    } finally {
      await worker.stop();
      await store.close();
    }
  });
});
