import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { MAX_DEBUGGER_STREAMS, MAX_LAG } from '../../src/admin/debugger-stream.js';
import { SseReader, StreamEnded } from '../helpers/sse.js';
import { TEST_ADMIN_TOKEN, type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

const run = promisify(execFile);
const BIN = path.resolve(import.meta.dirname, '..', '..', '..', 'bin', 'switchyard.js');
const AUTH = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

void describe('debugger', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy.close();
  });

  const stream = (sourceId: string, headers: Record<string, string> = {}): Promise<SseReader> =>
    SseReader.open(`${sy.url}/admin/v1/sources/${sourceId}/debugger/stream`, { ...AUTH, ...headers });
  const connected = async (reader: SseReader): Promise<void> => {
    assert.equal(reader.response.status, 200);
    await reader.until((b) => b.kind === 'comment' && b.text === 'connected');
  };

  void it('lists a source\'s recent messages newest first, with statuses, reasons and a limit', async () => {
    const source = await sy.createSource('list');
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'First', messageId: 'm-1' });
    await sy.send('/v1/track', source.writeKey, { userId: 'u1' });
    await sy.send('/v1/track', source.writeKey, { userId: 'u1', event: 'First again', messageId: 'm-1' });
    const suppression = await sy.admin('POST', '/regulations', { regulationType: 'SUPPRESS_ONLY', subjectType: 'USER_ID', subjectIds: ['quiet'], sourceIds: [source.id] });
    await sy.send('/v1/identify', source.writeKey, { userId: 'quiet', traits: { a: 1 } });

    const { status, body } = await sy.admin('GET', `/sources/${source.id}/debugger`);
    assert.equal(status, 200);
    assert.deepEqual(
      body.messages.map((m: any) => [m.type, m.status, m.reason]),
      [
        ['identify', 'suppressed', `user is suppressed by regulation ${suppression.body.id}`],
        ['track', 'duplicate', undefined],
        ['track', 'rejected', 'track call without event'],
        ['track', 'accepted', undefined],
      ],
    );
    const [, , rejected, accepted] = body.messages;
    assert.ok(!('reason' in accepted), 'no reason when there is none');
    assert.equal(accepted.message.event, 'First');
    assert.equal(accepted.message.messageId, 'm-1');
    assert.equal(rejected.message.userId, 'u1');
    assert.ok(body.messages.every((m: any) => new Date(m.receivedAt).toISOString() === m.receivedAt));
    assert.ok(body.messages[0].seq > body.messages[1].seq);

    assert.deepEqual((await sy.admin('GET', `/sources/${source.id}/debugger?limit=2`)).body.messages, body.messages.slice(0, 2));
    for (const limit of ['0', '501', 'ten']) {
      const refused = await sy.admin('GET', `/sources/${source.id}/debugger?limit=${limit}`);
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, 'invalid_request');
    }
    const missing = await sy.admin('GET', '/sources/src_nope/debugger');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'not_found');

    await sy.send('/v1/batch', source.writeKey, { batch: Array.from({ length: 60 }, (_, n) => ({ type: 'track', userId: 'u', event: 'E', properties: { n } })) });
    const latest = (await sy.admin('GET', `/sources/${source.id}/debugger`)).body.messages;
    assert.equal(latest.length, 50, 'at most 50 by default');
    assert.equal(latest[0].message.properties.n, 59);
    assert.equal((await sy.admin('GET', `/sources/${source.id}/debugger?limit=500`)).body.messages.length, 64);
  });

  void it('streams messages received after connecting, as Server-Sent Events, and resumes from Last-Event-ID', async () => {
    const source = await sy.createSource('stream');
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Before' });
    let reader = await stream(source.id);
    try {
      assert.match(reader.response.headers.get('content-type') ?? '', /^text\/event-stream/);
      await connected(reader);
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'One' });
      await sy.send('/v1/track', source.writeKey, { userId: 'u' });
      const events = await reader.events(2);
      assert.deepEqual(
        events.map((e) => [e.data.type, e.data.status, e.data.message.event]),
        [
          ['track', 'accepted', 'One'],
          ['track', 'rejected', undefined],
        ],
        'only what came after connecting',
      );
      assert.equal(events[0]!.id, String(events[0]!.data.seq));
      const listed = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages[0];
      assert.deepEqual(events[1]!.data, listed, 'an event is the same entry as the list shows');

      reader.close();
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Missed 1' });
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Missed 2' });
      reader = await stream(source.id, { 'last-event-id': events[1]!.id! });
      await connected(reader);
      assert.deepEqual((await reader.events(2)).map((e) => e.data.message.event), ['Missed 1', 'Missed 2']);

      // Escapes, quotes, non-ASCII and U+2028 survive the stream as they do the list.
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Ünï "q" \\ \u2028 \n end', properties: { nested: { a: [1, null, 'x'] } } });
      const [tricky] = await reader.events(1);
      const listedTricky = (await sy.admin('GET', `/sources/${source.id}/debugger?limit=1`)).body.messages[0];
      assert.equal(tricky!.data.message.event, 'Ünï "q" \\ \u2028 \n end');
      assert.deepEqual(tricky!.data, listedTricky);
    } finally {
      reader.close();
    }

    const badId = await fetch(`${sy.url}/admin/v1/sources/${source.id}/debugger/stream`, { headers: { ...AUTH, 'last-event-id': 'abc' } });
    assert.equal(badId.status, 400);
    assert.equal(((await badId.json()) as any).error.code, 'invalid_request');
    const missing = await fetch(`${sy.url}/admin/v1/sources/src_nope/debugger/stream`, { headers: AUTH });
    assert.equal(missing.status, 404);
    const anonymous = await fetch(`${sy.url}/admin/v1/sources/${source.id}/debugger/stream`);
    assert.equal(anonymous.status, 401);
  });

  void it('lets a reader that stops reading fall behind, then skips it ahead and says how many it missed', async () => {
    const source = await sy.createSource('slow');
    const reader = await stream(source.id);
    try {
      await connected(reader);
      // The reader now reads nothing while far more than a socket's buffers
      // is ingested, then one batch that alone is more than the lag allowed.
      const padding = 'x'.repeat(3_500);
      for (let batch = 0; batch < 12; batch++) {
        const sent = await sy.send('/v1/batch', source.writeKey, {
          batch: Array.from({ length: 100 }, (_, n) => ({ type: 'track', userId: 'u', event: 'Big', properties: { n, padding } })),
        });
        assert.equal(sent.status, 200);
      }
      const last = MAX_LAG + 100;
      await sy.send('/v1/batch', source.writeKey, { batch: Array.from({ length: last }, (_, n) => ({ type: 'track', userId: 'u', event: 'Small', properties: { n: n + 1 } })) });

      const skip = await reader.until((b) => b.kind === 'comment' && b.text.startsWith('skipped'), 30_000);
      const skipped = Number(/^skipped (\d+) messages/.exec(skip.kind === 'comment' ? skip.text : '')?.[1]);
      assert.ok(skipped > MAX_LAG, `skipped ${skipped}`);
      let received = 0;
      for (;;) {
        const [event] = await reader.events(1);
        received++;
        if (event!.data.message.event === 'Small' && event!.data.message.properties.n === last) break;
      }
      assert.ok(received < last, `after the skip it got only the newest messages (${received})`);
    } finally {
      reader.close();
    }
  });

  void it('ends open streams when the server stops', async () => {
    const other = await startTestSwitchyard();
    const source = await other.createSource('closing');
    const reader = await SseReader.open(`${other.url}/admin/v1/sources/${source.id}/debugger/stream`, AUTH);
    await connected(reader);
    await other.close();
    await assert.rejects(reader.next(), StreamEnded);
  });

  void it(`serves at most ${MAX_DEBUGGER_STREAMS} live streams at once on a node, and another once one closes`, async () => {
    const other = await startTestSwitchyard();
    const readers: SseReader[] = [];
    try {
      const source = await other.createSource('many');
      const url = `${other.url}/admin/v1/sources/${source.id}/debugger/stream`;
      for (let i = 0; i < MAX_DEBUGGER_STREAMS; i++) readers.push(await SseReader.open(url, AUTH));
      await Promise.all(readers.map((reader) => connected(reader)));
      const refused = await fetch(url, { headers: AUTH });
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get('retry-after'), '5');
      const body = (await refused.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'overloaded');
      assert.match(body.error.message, /live debugger streams are open on this node/);

      readers.shift()!.close();
      const reopened = await eventually(async () => {
        const response = await fetch(url, { headers: AUTH });
        if (response.status === 200) return response;
        await response.body?.cancel();
        return undefined;
      }, 10_000, 'a stream once one closed');
      await reopened.body?.cancel();
    } finally {
      for (const reader of readers) reader.close();
      await other.close();
    }
  });

  void it('prints a source\'s messages from the CLI, and follows new ones', async () => {
    const source = await sy.createSource('cli');
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Old' });
    await sy.send('/v1/track', source.writeKey, { userId: 'u' });
    await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Newer' });
    const env = { PATH: process.env['PATH'] };
    const { stdout } = await run(process.execPath, [BIN, 'debugger', source.id, '--limit', '2', '--data-dir', sy.dataDir], { env });
    const lines = stdout.trimEnd().split('\n');
    assert.equal(lines.length, 2);
    assert.match(lines[0]!, /^\d{4}-\d\d-\d\dT\S+Z {2}rejected +track +track call without event {2}\{"userId":"u"/);
    assert.match(lines[1]!, /^\S+Z {2}accepted +track +\{.*"event":"Newer"/);
    await assert.rejects(run(process.execPath, [BIN, 'debugger', 'src_nope', '--data-dir', sy.dataDir], { env }), /no source with id/);

    const child = spawn(process.execPath, [BIN, 'debugger', source.id, '--follow', '--limit', '1', '--data-dir', sy.dataDir], { env });
    try {
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      await eventually(() => (out.includes('Newer') ? true : undefined), 10_000, 'the recent message');
      await sy.send('/v1/track', source.writeKey, { userId: 'u', event: 'Followed' });
      await eventually(() => (out.includes('"event":"Followed"') ? true : undefined), 10_000, 'the followed message');
      assert.equal(out.trimEnd().split('\n').length, 2);
      child.kill('SIGINT');
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
