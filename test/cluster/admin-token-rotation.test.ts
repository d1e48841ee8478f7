/**
 * `admin-token rotate` on PostgreSQL with two `serve` processes on one
 * database: the old token stops working on both nodes within a second,
 * although only the old token is used meanwhile.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/switchyard.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');
/** The documented bound, plus a margin: a request this long after the rotation committed must see it. */
const ROTATION_TAKES_EFFECT_MS = 1_100;

function rotate(databaseUrl: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, 'admin-token', 'rotate'],
      { env: { PATH: process.env['PATH'] ?? '', LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl, SWITCHYARD_ADMIN_TOKEN: '' }, timeout: 20_000 },
      (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`admin-token rotate failed: ${stderr}`, { cause: error }));
        else resolve((JSON.parse(stdout) as { adminToken: string }).adminToken);
      },
    );
  });
}

async function status(url: string, token: string): Promise<number> {
  const response = await fetch(`${url}/admin/v1/sources`, { headers: { authorization: `Bearer ${token}` } });
  await response.arrayBuffer();
  return response.status;
}

await describePostgres('admin-token rotate on two PostgreSQL nodes', () => {
  let db: FreshDatabase;
  const nodes: ChildSwitchyard[] = [];
  before(async () => {
    db = await freshDatabase();
  });
  after(async () => {
    await Promise.all(nodes.map((node) => node.kill('SIGKILL')));
    await db?.drop();
  });

  it('stops the old token on every node within a second, twice in a row', { timeout: 90_000 }, async () => {
    const env = { DATABASE_URL: db.url, SWITCHYARD_ADMIN_TOKEN: '' };
    nodes.push(await startChildSwitchyard(env));
    let token = await eventually(() => /Admin token[^:]*: (\S+)/.exec(nodes[0]!.output())?.[1], 10_000, 'the token in the banner');
    nodes.push(await startChildSwitchyard(env));

    for (let round = 0; round < 2; round++) {
      // Both nodes use the current token, so each has its digest at hand.
      for (const node of nodes) assert.equal(await status(node.url, token), 200, `round ${round}: ${node.url} takes the current token`);
      const fresh = await rotate(db.url);
      assert.notEqual(fresh, token);
      await setTimeout(ROTATION_TAKES_EFFECT_MS);
      for (const node of nodes) {
        assert.equal(await status(node.url, token), 401, `round ${round}: ${node.url} still takes the old token`);
        assert.equal(await status(node.url, fresh), 200, `round ${round}: ${node.url} takes the new token`);
      }
      token = fresh;
    }
  });
});
