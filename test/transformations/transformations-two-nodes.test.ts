/**
 * Transformations on two `serve` processes sharing one PostgreSQL database:
 * messages taken by either node are transformed (whichever node's stage
 * runs them), and a new version attached through one node is the one both
 * run from then on (the config change reaches the other node by NOTIFY).
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { type ChildSwitchyard, startChildSwitchyard } from '../helpers/child-switchyard.js';
import { describePostgres, freshDatabase, type FreshDatabase } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { TEST_ADMIN_TOKEN, basicAuth, eventually, untilKeyKnown } from '../helpers/switchyard.js';

const versionCode = (tag: string): string => `export function transformEvent(event) {
  event.properties.shapedBy = '${tag}';
  return event;
}`;

await describePostgres('transformations on two PostgreSQL nodes', () => {
  let db: FreshDatabase;
  let receiver: TestReceiver;
  const nodes: ChildSwitchyard[] = [];

  before(async () => {
    db = await freshDatabase();
    receiver = await startReceiver();
  });
  after(async () => {
    await Promise.all(nodes.map((node) => node.kill('SIGKILL')));
    await receiver?.close();
    await db?.drop();
  });

  const call = async (node: ChildSwitchyard, method: string, route: string, body?: unknown, auth = `Bearer ${TEST_ADMIN_TOKEN}`): Promise<any> => {
    const response = await fetch(`${node.url}${route}`, {
      method,
      headers: { authorization: auth, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const json = await response.json();
    assert.ok(response.ok, `${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const shapedBy = (run: string): Map<string, string> =>
    new Map(
      receiver.requests
        .map((r) => JSON.parse(r.body) as { properties?: { run?: string; n?: number; shapedBy?: string } })
        .filter((b) => b.properties?.run === run)
        .map((b) => [String(b.properties!.n), b.properties!.shapedBy ?? 'untransformed']),
    );

  it('both nodes transform, and both run a new version once it is attached', { timeout: 180_000 }, async () => {
    const env = { DATABASE_URL: db.url, SWITCHYARD_ALLOW_PRIVATE_RECEIVERS: 'true' };
    nodes.push(await startChildSwitchyard(env));
    nodes.push(await startChildSwitchyard(env));
    const [a, b] = nodes as [ChildSwitchyard, ChildSwitchyard];
    const source = await call(a, 'POST', '/admin/v1/sources', { name: 'shop' });
    const transformation = await call(a, 'POST', '/admin/v1/transformations', { name: 'shape', code: versionCode('v1') });
    await call(a, 'PUT', `/admin/v1/sources/${source.id}/destinations/webhooks`, {
      enabled: true,
      settings: { webhooks: [{ url: receiver.url }], transformation: { id: transformation.id } },
    });

    // Ten messages through each node. Until b has seen the source and its
    // destination (config by NOTIFY, or its poll on a loaded machine), b
    // answers 401 (nothing stored) or routes untransformed, so wait for b to
    // transform one before counting.
    const send = async (node: ChildSwitchyard, run: string, n: number): Promise<void> => {
      await call(node, 'POST', '/v1/track', { userId: `u${n}`, event: 'E', properties: { run, n } }, basicAuth(source.writeKey));
    };
    await eventually(async () => {
      const response = await untilKeyKnown(b.url, async () => {
        const answer = await fetch(`${b.url}/v1/track`, {
          method: 'POST',
          headers: { authorization: basicAuth(source.writeKey), 'content-type': 'application/json' },
          body: JSON.stringify({ userId: 'u0', event: 'E', properties: { run: 'warm-up', n: 0 } }),
        });
        await answer.arrayBuffer();
        return answer;
      });
      assert.equal(response.status, 200);
      return shapedBy('warm-up').get('0') === 'v1' ? true : undefined;
    }, 30_000, 'node b to transform');
    for (let n = 0; n < 20; n++) await send(n % 2 === 0 ? a : b, 'first', n);
    await eventually(() => (shapedBy('first').size === 20 ? true : undefined), 60_000, 'the first twenty delivered');
    assert.deepEqual([...new Set(shapedBy('first').values())], ['v1'], 'every message, taken by either node, ran version 1');

    // A new version, saved and attached (latest) through node b.
    const updated = await call(b, 'PUT', `/admin/v1/transformations/${transformation.id}`, { code: versionCode('v2') });
    assert.equal(updated.version, 2);
    await eventually(async () => {
      const run = `probe-${Date.now()}`;
      await send(a, run, 0);
      await eventually(() => (shapedBy(run).size === 1 ? true : undefined), 30_000, 'the probe delivered');
      return shapedBy(run).get('0') === 'v2' ? true : undefined;
    }, 60_000, 'node a to run version 2');
    for (let n = 0; n < 20; n++) await send(n % 2 === 0 ? a : b, 'second', n);
    await eventually(() => (shapedBy('second').size === 20 ? true : undefined), 60_000, 'the second twenty delivered');
    assert.deepEqual([...new Set(shapedBy('second').values())], ['v2'], 'after the change both nodes run version 2');
  });
});
