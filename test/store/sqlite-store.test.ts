import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { describeEngageContract } from './engage-contract.js';
import { describeObservedContract } from './observed-contract.js';
import { describeRegulationsContract } from './regulations-contract.js';
import { describeReplaysContract } from './replays-contract.js';
import { describeStoreContract } from './store-contract.js';
import { describeTrafficContract } from './traffic-contract.js';

const openSqlite = async (): Promise<{ store: SqliteStore; cleanup: () => Promise<void> }> => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-store-'));
  const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
  await store.migrate();
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

describeStoreContract('sqlite', openSqlite);
describeRegulationsContract('sqlite', openSqlite);
describeReplaysContract('sqlite', openSqlite);
describeEngageContract('sqlite', openSqlite);
describeTrafficContract('sqlite', openSqlite);
describeObservedContract('sqlite', openSqlite);
