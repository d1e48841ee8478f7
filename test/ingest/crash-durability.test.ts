import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { processLeftovers, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { TEST_ADMIN_TOKEN, basicAuth } from '../helpers/switchyard.js';

const ROUNDS = 3;
const SENDERS = 16;

/**
 * kill -9 under load, repeatedly: every message answered 200 must be in the
 * store after a restart. Messages whose request was cut by the kill may or
 * may not be there; they were never acknowledged.
 */
describe('durability across kill -9', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  for (const durability of ['process', 'fsync'] as const) {
    it(`keeps every acknowledged message (${durability} durability, ${ROUNDS} kills)`, async () => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'switchyard-crash-'));
      dirs.push(dataDir);
      const env = { SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_DURABILITY: durability };
      const acknowledged = new Set<string>();
      let sourceId = '';
      let writeKey = '';

      for (let round = 0; round < ROUNDS; round++) {
        const server = await startChildSwitchyard(env);
        try {
          if (round === 0) {
            const created = await fetch(`${server.url}/admin/v1/sources`, {
              method: 'POST',
              headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
              body: JSON.stringify({ name: 'crash' }),
            });
            ({ id: sourceId, writeKey } = (await created.json()) as { id: string; writeKey: string });
          }
          let stop = false;
          let sent = 0;
          const sender = async (worker: number) => {
            // Bounded: at most 2,000 requests per sender per round.
            for (let i = 0; !stop && i < 2_000; i++) {
              const messageId = `r${round}-w${worker}-${i}`;
              sent++;
              try {
                const response = await fetch(`${server.url}/v1/batch`, {
                  method: 'POST',
                  headers: { authorization: basicAuth(writeKey), 'content-type': 'application/json' },
                  body: JSON.stringify({ batch: [{ type: 'track', userId: 'u', event: 'E', messageId }, { type: 'identify', userId: 'u', messageId: `${messageId}-b` }] }),
                });
                if (response.status === 200) {
                  acknowledged.add(messageId);
                  acknowledged.add(`${messageId}-b`);
                }
                await response.arrayBuffer();
              } catch {
                return; // the server is gone
              }
            }
          };
          const senders = Array.from({ length: SENDERS }, (_, w) => sender(w));
          // Let load build up, then kill mid-stream.
          while (sent < 300 * (round + 1)) await new Promise((resolve) => setTimeout(resolve, 5));
          await server.kill('SIGKILL');
          stop = true;
          await Promise.all(senders);
        } finally {
          await server.kill('SIGKILL');
        }
      }

      // A 200 means stored raw: a restart processes what the last kill left.
      await processLeftovers(env, dataDir);
      const store = SqliteStore.open({ dataDir, durability: 'process' });
      await store.migrate();
      try {
        const messages = await store.listRecentMessages(sourceId, 1_000_000);
        const stored = new Set(messages.map((m) => m.messageId));
        const lost = [...acknowledged].filter((id) => !stored.has(id));
        assert.ok(acknowledged.size > 500, `enough load: ${acknowledged.size} acknowledged`);
        assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.size} acknowledged messages lost`);
        // Each raw request processed once: a second processing would store its messages again, as duplicates.
        assert.equal(messages.length, stored.size, 'every message stored exactly once');
      } finally {
        await store.close();
      }
    });
  }
});
