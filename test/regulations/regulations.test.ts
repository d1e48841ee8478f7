import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store, StoredMessage } from '../../src/store/store.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** A Webhooks destination that the tests never need to reach: only the queued deliveries are checked. */
async function enableWebhooks(store: Store, sourceId: string, enabled = true, url = 'http://127.0.0.1:1/x'): Promise<void> {
  await store.putDestination({ sourceId, kind: 'webhooks', enabled, settings: { webhooks: [{ url, headers: {} }] }, updatedAt: Date.now() });
}

async function messagesOf(store: Store, sourceId: string): Promise<StoredMessage[]> {
  return store.listRecentMessages(sourceId, 1000);
}

/** The source's deliveries of `delete` messages, with the user each is for. */
async function deleteDeliveries(store: Store, sourceId: string): Promise<Array<{ userId: string | undefined; status: string }>> {
  const bySeq = new Map((await messagesOf(store, sourceId)).map((m) => [m.seq, m]));
  return (await store.listDeliveries({ sourceId, limit: 1000 }))
    .filter((d) => bySeq.get(d.messageSeq)?.type === 'delete')
    .map((d) => ({ userId: bySeq.get(d.messageSeq)?.userId, status: d.status }));
}

async function finished(sy: TestSwitchyard, id: string): Promise<any> {
  return eventually(async () => {
    const { body } = await sy.admin('GET', `/regulations/${id}`);
    return body.status === 'FINISHED' || body.status === 'FAILED' ? body : undefined;
  }, 10_000, `regulation ${id} to end`);
}

async function regulate(sy: TestSwitchyard, body: unknown): Promise<string> {
  const created = await sy.admin('POST', '/regulations', body);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.id as string;
}

void describe('regulations: deletion and suppression requests', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy.close();
  });

  const track = (writeKey: string, userId: string, event = 'Viewed', more: object = {}): Promise<{ status: number }> =>
    sy.send('/v1/track', writeKey, { userId, event, ...more });

  void it('erases a user\'s messages everywhere and queues one delete per source whose Webhooks destination is enabled', async () => {
    const [a, b, off, none] = [await sy.createSource('a'), await sy.createSource('b'), await sy.createSource('off'), await sy.createSource('none')];
    await enableWebhooks(sy.store, a.id);
    await enableWebhooks(sy.store, b.id);
    await enableWebhooks(sy.store, off.id, false);
    for (const [source, user] of [[a, 'alice'], [a, 'alice'], [a, 'bob'], [b, 'alice'], [off, 'alice'], [none, 'alice']] as const) {
      assert.equal((await track(source.writeKey, user)).status, 200);
    }

    const created = await sy.admin('POST', '/regulations', { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: ['alice', 'alice'] });
    assert.equal(created.status, 201);
    assert.match(created.body.id, /^reg_/);
    assert.equal(created.body.status, 'INITIALIZED');
    const done = await finished(sy, created.body.id);
    assert.equal(done.status, 'FINISHED');
    assert.deepEqual(done.subjectIds, ['alice'], 'repeated ids count once');
    assert.equal(done.sourceIds, null);
    for (const source of [a, b, off, none]) {
      assert.deepEqual(done.sources.find((s: any) => s.sourceId === source.id), { sourceId: source.id, status: 'FINISHED' });
    }

    for (const source of [a, b, off, none]) {
      const left = await messagesOf(sy.store, source.id);
      assert.ok(!left.some((m) => m.userId === 'alice' && m.type !== 'delete'), 'alice\'s messages are gone');
    }
    assert.deepEqual((await messagesOf(sy.store, a.id)).filter((m) => m.type === 'track').map((m) => m.userId), ['bob'], 'others\' stay');
    assert.deepEqual(await deleteDeliveries(sy.store, a.id).then((d) => d.map((x) => x.userId)), ['alice']);
    assert.deepEqual(await deleteDeliveries(sy.store, b.id).then((d) => d.map((x) => x.userId)), ['alice']);
    assert.deepEqual(await deleteDeliveries(sy.store, off.id), [], 'a disabled destination gets no delete');
    assert.deepEqual(await messagesOf(sy.store, none.id), [], 'no destination: nothing to send, nothing left');

    const [deleteMessage] = (await messagesOf(sy.store, a.id)).filter((m) => m.type === 'delete');
    const body = JSON.parse(deleteMessage!.body);
    assert.deepEqual(Object.keys(body).sort(), ['messageId', 'timestamp', 'type', 'userId']);
    assert.equal(body.type, 'delete');
    assert.equal(body.userId, 'alice');
    assert.equal(body.messageId, deleteMessage!.messageId);
    assert.ok(!Number.isNaN(Date.parse(body.timestamp)));

    const debuggerView = await sy.admin('GET', `/sources/${a.id}/debugger`);
    assert.deepEqual(
      debuggerView.body.messages.map((m: any) => [m.type, m.status, m.message.userId]),
      [
        ['delete', 'accepted', 'alice'],
        ['track', 'accepted', 'bob'],
      ],
    );
  });

  void it('SUPPRESS_WITH_DELETE erases, then stores the user\'s messages as suppressed, unrouted, until UNSUPPRESS', async () => {
    const [s, t] = [await sy.createSource('s'), await sy.createSource('t')];
    await enableWebhooks(sy.store, s.id);
    await enableWebhooks(sy.store, t.id);
    assert.equal((await track(s.writeKey, 'carol')).status, 200);
    const id = await regulate(sy, { regulationType: 'SUPPRESS_WITH_DELETE', subjectType: 'USER_ID', subjectIds: ['carol'], sourceIds: [s.id] });
    const done = await finished(sy, id);
    assert.deepEqual(done.sources, [{ sourceId: s.id, status: 'FINISHED' }], 'only the named source');
    assert.equal((await deleteDeliveries(sy.store, s.id)).length, 1);

    assert.equal((await track(s.writeKey, 'carol', 'After')).status, 200);
    assert.equal((await track(s.writeKey, 'dan', 'Other user')).status, 200);
    assert.equal((await track(t.writeKey, 'carol', 'Other source')).status, 200);
    const [newest, other] = await sy.store.listRecentMessages(s.id, 2);
    assert.equal(other?.status, 'suppressed');
    assert.equal(other?.reason, `user is suppressed by regulation ${id}`);
    assert.equal(newest?.status, 'accepted');
    const suppressedJobs = (await sy.store.listDeliveries({ sourceId: s.id, limit: 100 })).filter((d) => d.messageSeq === other?.seq);
    assert.deepEqual(suppressedJobs, [], 'a suppressed message is routed nowhere');
    assert.equal((await sy.store.listRecentMessages(t.id, 1))[0]?.status, 'accepted', 'other sources are not suppressed');

    const lifted = await sy.admin('POST', '/regulations', { regulationType: 'UNSUPPRESS', subjectType: 'USER_ID', subjectIds: ['carol'], sourceIds: [s.id] });
    assert.equal(lifted.status, 201);
    assert.equal(lifted.body.status, 'FINISHED');
    assert.equal((await track(s.writeKey, 'carol', 'Back')).status, 200);
    const [back] = await sy.store.listRecentMessages(s.id, 1);
    assert.equal(back?.status, 'accepted');
    assert.equal((await sy.store.listDeliveries({ sourceId: s.id, limit: 100 })).filter((d) => d.messageSeq === back?.seq).length, 1);
  });

  void it('SUPPRESS_ONLY holds from the answer on, on every source, also on sources created later', async () => {
    const before = await sy.createSource('before');
    const created = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['erin', 'frank'] });
    assert.equal(created.status, 201);
    assert.equal(created.body.status, 'FINISHED', 'nothing left to run');
    assert.equal((await track(before.writeKey, 'erin')).status, 200);
    assert.equal((await sy.store.listRecentMessages(before.id, 1))[0]?.status, 'suppressed');

    const later = await sy.createSource('later');
    await enableWebhooks(sy.store, later.id);
    await sy.send('/v1/batch', later.writeKey, {
      batch: [
        { type: 'track', userId: 'frank', event: 'E' },
        { type: 'identify', userId: 'gina' },
        { type: 'track', userId: 'erin' },
      ],
    });
    const { body } = await sy.admin('GET', `/sources/${later.id}/debugger`);
    assert.deepEqual(
      body.messages.map((m: any) => [m.message.userId, m.status, m.reason]),
      [
        ['erin', 'rejected', 'track call without event'],
        ['gina', 'accepted', undefined],
        ['frank', 'suppressed', `user is suppressed by regulation ${created.body.id}`],
      ],
      'a message that breaks a rule keeps its reason',
    );

    await regulate(sy, { regulationType: 'UNSUPPRESS', subjectType: 'USER_ID', subjectIds: ['erin', 'frank'] });
    assert.equal((await track(later.writeKey, 'frank')).status, 200);
    assert.equal((await sy.store.listRecentMessages(later.id, 1))[0]?.status, 'accepted');
  });

  void it('refuses invalid requests with invalid_request naming the field', async () => {
    const source = await sy.createSource('valid');
    const ok = { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: ['u'] };
    const cases: Array<[unknown, RegExp]> = [
      ['[1]', /body must be a JSON object/],
      [{ ...ok, regulationType: undefined }, /regulationType must be one of DELETE_ONLY/],
      [{ ...ok, regulationType: 'DELETE' }, /regulationType/],
      [{ ...ok, subjectType: 'ANONYMOUS_ID' }, /subjectType must be "USER_ID"/],
      [{ ...ok, subjectIds: undefined }, /subjectIds must be an array of 1 to 5000 items/],
      [{ ...ok, subjectIds: [] }, /subjectIds must be an array of 1 to 5000/],
      [{ ...ok, subjectIds: 'u' }, /subjectIds must be an array/],
      [{ ...ok, subjectIds: Array.from({ length: 5001 }, (_, i) => `u${i}`) }, /subjectIds must be an array of 1 to 5000/],
      [{ ...ok, subjectIds: ['u', ''] }, /^subjectIds\[1\] must be a non-empty string of at most 1024 bytes \(UTF-8\)$/],
      [{ ...ok, subjectIds: ['u', 'v', 7] }, /subjectIds\[2\]/],
      // The same message whatever makes an id too long: its characters or its bytes (as ingest bounds ids).
      [{ ...ok, subjectIds: ['x'.repeat(1025)] }, /^subjectIds\[0\] must be a non-empty string of at most 1024 bytes \(UTF-8\)$/],
      [{ ...ok, subjectIds: ['\u4e00'.repeat(342)] }, /^subjectIds\[0\] must be a non-empty string of at most 1024 bytes \(UTF-8\)$/],
      [{ ...ok, sourceIds: [] }, /sourceIds must be an array of 1 to 1000 items/],
      [{ ...ok, sourceIds: [source.id, 'src_nope', 'src_gone'] }, /sourceIds: no source with id "src_nope", "src_gone"/],
      [{ ...ok, userIds: ['u'] }, /unknown field "userIds"/],
    ];
    for (const [body, message] of cases) {
      const answer = await sy.admin('POST', '/regulations', body);
      assert.equal(answer.status, 400, JSON.stringify(body).slice(0, 100));
      assert.equal(answer.body.error.code, 'invalid_request');
      assert.match(answer.body.error.message, message);
    }
    assert.equal((await sy.admin('GET', '/regulations?status=DONE')).body.error.code, 'invalid_request');
    assert.equal((await sy.admin('GET', '/regulations?limit=501')).body.error.code, 'invalid_request');
    const missing = await sy.admin('GET', '/regulations/reg_nope');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'not_found');

    // The largest request: 5,000 ids of 1,024 characters (over the server's usual body limit).
    const largest = Array.from({ length: 5000 }, (_, i) => `${i}`.padEnd(1024, 'x'));
    const big = await sy.admin('POST', '/regulations', { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: largest, sourceIds: [source.id] });
    assert.equal(big.status, 201, JSON.stringify(big.body));
    const detail = await finished(sy, big.body.id);
    assert.equal(detail.subjectIds.length, 5000);
  });

  void it('lists requests newest first, by status, without subject ids', async () => {
    const first = await regulate(sy, { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['l1', 'l2'] });
    const second = await regulate(sy, { regulationType: 'UNSUPPRESS', subjectType: 'USER_ID', subjectIds: ['l1', 'l2'] });
    const { status, body } = await sy.admin('GET', '/regulations?limit=2');
    assert.equal(status, 200);
    assert.deepEqual(body.regulations.map((r: any) => r.id), [second, first]);
    const listed = body.regulations[1];
    assert.equal(listed.subjectIds, undefined);
    assert.equal(listed.subjectCount, 2);
    assert.equal(listed.regulationType, 'SUPPRESS_ONLY');
    assert.equal(listed.subjectType, 'USER_ID');
    assert.ok(!Number.isNaN(Date.parse(listed.createdAt)) && !Number.isNaN(Date.parse(listed.updatedAt)));
    const byStatus = await sy.admin('GET', '/regulations?status=FINISHED&limit=500');
    assert.ok(byStatus.body.regulations.length >= 2);
    assert.ok(byStatus.body.regulations.every((r: any) => r.status === 'FINISHED'));
    assert.equal((await sy.admin('GET', '/regulations?status=FAILED')).body.regulations.length, 0);
  });

  void it('lists at most 20 sources per request with all of them counted, and pages them reading one', async () => {
    for (let i = 0; i < 60; i++) await sy.createSource(`bounded ${i}`);
    const sourceIds = ((await sy.admin('GET', '/sources')).body.sources as Array<{ id: string }>).map((s) => s.id).sort();
    assert.ok(sourceIds.length >= 60);
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await regulate(sy, { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: [`b${i}`] }));

    const listed = await sy.admin('GET', '/regulations?limit=30');
    assert.deepEqual(listed.body.regulations.map((r: any) => r.id), [...ids].reverse());
    for (const regulation of listed.body.regulations) {
      assert.deepEqual(regulation.sources.map((s: any) => s.sourceId), sourceIds.slice(0, 20), 'the first 20 by source id');
      assert.deepEqual(regulation.sourceCounts, { total: sourceIds.length, pending: 0, finished: sourceIds.length, failed: 0 });
      assert.equal(regulation.nextSourcesAfter, undefined);
    }
    // Bounded by the 20, whatever the number of sources: under 3 KB a request here.
    assert.ok(JSON.stringify(listed.body).length < 30 * 3_000, `${JSON.stringify(listed.body).length} bytes`);

    const pages: string[] = [];
    let after: string | undefined;
    for (;;) {
      const { status, body } = await sy.admin('GET', `/regulations/${ids[0]}?sourcesLimit=25${after === undefined ? '' : `&sourcesAfter=${after}`}`);
      assert.equal(status, 200);
      assert.ok(body.sources.length <= 25);
      assert.deepEqual(body.subjectIds, ['b0']);
      pages.push(...body.sources.map((s: any) => s.sourceId));
      after = body.nextSourcesAfter;
      if (after === undefined) break;
    }
    assert.deepEqual(pages, sourceIds, 'every source, once, in order');
    assert.equal((await sy.admin('GET', `/regulations/${ids[0]}`)).body.sources.length, sourceIds.length, 'up to 1,000 unasked');
    const refused = await sy.admin('GET', `/regulations/${ids[0]}?sourcesLimit=1001`);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'invalid_request');
  });
});

void describe('regulations: restarts', () => {
  void it('resumes a deletion left unfinished by a stop', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-regulations-'));
    try {
      const first = await startTestSwitchyard({ 'data-dir': dir });
      const [a, b] = [await first.createSource('a'), await first.createSource('b')];
      await enableWebhooks(first.store, a.id);
      await enableWebhooks(first.store, b.id);
      for (const source of [a, b]) await first.send('/v1/track', source.writeKey, { userId: 'hank', event: 'E' });
      await first.close();

      // As a server would leave it when stopped after the first of two steps.
      const store = SqliteStore.open({ dataDir: dir, durability: 'process' });
      await store.migrate();
      const id = 'reg_left_unfinished';
      await store.createRegulation({ id, regulationType: 'DELETE_ONLY', subjectIds: ['hank'], sourceIds: undefined, stepSourceIds: [a.id, b.id], createdAt: Date.now() });
      const deleteOnA = { sourceId: a.id, status: 'accepted', type: 'delete', messageId: 'm-a', userId: 'hank', receivedAt: Date.now(), body: '{"type":"delete","userId":"hank"}', destinations: ['webhooks'] } as const;
      assert.equal(await store.runRegulationStep({ regulationId: id, sourceId: a.id, eraseUserIds: ['hank'], messages: [deleteOnA], at: Date.now() }), true);
      assert.equal((await store.getRegulation(id))?.status, 'RUNNING');
      await store.close();

      const second = await startTestSwitchyard({ 'data-dir': dir });
      try {
        const done = await finished(second, id);
        assert.equal(done.status, 'FINISHED');
        assert.deepEqual(await deleteDeliveries(second.store, a.id).then((d) => d.length), 1, 'the finished step is not run again');
        assert.deepEqual(await deleteDeliveries(second.store, b.id).then((d) => d.map((x) => x.userId)), ['hank']);
        assert.ok(!(await messagesOf(second.store, b.id)).some((m) => m.type === 'track'));
      } finally {
        await second.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

void describe('regulations: delete messages reach the receivers', () => {
  let sy: TestSwitchyard;
  let receiver: http.Server;
  let receiverUrl: string;
  const received: Array<{ path: string; body: any }> = [];
  before(async () => {
    receiver = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({ path: request.url ?? '', body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        response.end('ok');
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
  });
  after(async () => {
    await sy.close();
    receiver.closeAllConnections();
    receiver.close();
  });

  void it('sends exactly one delete per source through the normal delivery path', async () => {
    const [a, b] = [await sy.createSource('a'), await sy.createSource('b')];
    for (const [source, name] of [[a, 'a'], [b, 'b']] as const) {
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, { settings: { webhooks: [{ url: `${receiverUrl}/${name}` }] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      await sy.send('/v1/track', source.writeKey, { userId: 'ivy', event: 'E' });
    }
    const id = await regulate(sy, { regulationType: 'SUPPRESS_WITH_DELETE', subjectType: 'USER_ID', subjectIds: ['ivy'], sourceIds: [a.id, b.id] });
    await finished(sy, id);
    const succeeded = async (sourceId: string): Promise<true | undefined> => {
      const deliveries = await deleteDeliveries(sy.store, sourceId);
      return deliveries.length === 1 && deliveries[0]!.status === 'succeeded' ? true : undefined;
    };
    await eventually(async () => ((await succeeded(a.id)) && (await succeeded(b.id))) || undefined, 10_000, 'the deletes to be delivered');

    const deletes = received.filter((r) => r.body.type === 'delete');
    assert.deepEqual(deletes.map((r) => r.path).sort(), ['/a', '/b']);
    for (const { body } of deletes) {
      assert.equal(body.userId, 'ivy');
      assert.equal(body.version, undefined, 'a delete carries no version');
      assert.equal(typeof body.messageId, 'string');
    }
  });
});
