import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { describeOnBothStores } from '../helpers/postgres.js';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/*
 * The overview counts each message received once, under the status the
 * debugger shows for it. A transformation decides that after processing
 * counted the message `accepted`: a message it dropped showed `filtered` in
 * the debugger but stayed `accepted` in the overview (`filtered: 0`), and
 * one it failed on likewise stayed `accepted` instead of `failed`.
 */

const LOWER_V1 = `export function transformEvent(event) {
  if (event.event === 'Internal Ping') return null;
  if (event.event === 'Nothing') return [];
  if (event.event === 'Split') return [{ ...event, part: 1 }, { ...event, part: 2 }];
  if (event.event.startsWith('Boom')) throw new Error('boom');
  return { ...event, event: event.event.toLowerCase() };
}`;

// Version 2: of the three that failed, one now passes, one is dropped, one still fails.
const LOWER_V2 = `export function transformEvent(event) {
  if (event.event === 'Boom Dropped') return null;
  if (event.event === 'Boom Again') throw new Error('still');
  return { ...event, event: event.event.toLowerCase() };
}`;

const sum = (counts: readonly number[] | undefined): number => (counts ?? []).reduce((a, b) => a + b, 0);

function describeOverviewOfTransformations(name: string, flags: () => Record<string, string>): void {
  void describe(`overview of transformed messages: ${name}`, () => {
    let sy: TestSwitchyard;
    let receiver: TestReceiver;

    before(async () => {
      receiver = await startReceiver();
      // A server of its own: the overview counts every source's messages.
      sy = await startTestSwitchyard({ 'allow-private-receivers': 'true', 'retry-base-ms': '20', ...flags() });
    });
    after(async () => {
      await sy?.close();
      await receiver?.close();
    });

    const debuggerEntries = async (sourceId: string): Promise<any[]> => (await sy.admin('GET', `/sources/${sourceId}/debugger?limit=50`)).body.messages;
    const overview = async (): Promise<{ total: number; byStatus: Record<string, number[]> }> => {
      const answer = await sy.admin('GET', '/overview/traffic');
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer.body.messages;
    };
    /** The overview's totals per status (every status it lists) against the debugger's statuses of the same messages. */
    const assertAgrees = async (entries: readonly any[], expected: Record<string, number>): Promise<void> => {
      const fromDebugger: Record<string, number> = {};
      for (const entry of entries) fromDebugger[entry.status] = (fromDebugger[entry.status] ?? 0) + 1;
      assert.deepEqual(fromDebugger, expected, 'the debugger shows the statuses this test expects');
      const messages = await overview();
      const counted = Object.fromEntries(Object.entries(messages.byStatus).map(([status, counts]) => [status, sum(counts)]).filter(([, count]) => count !== 0));
      assert.deepEqual(counted, expected, 'the overview counts each message once, under the status the debugger shows');
      assert.equal(messages.total, entries.length);
      assert.deepEqual(messages.byStatus.failed?.length, 60, 'failed is one of the statuses always listed');
    };

    void it('counts a message a transformation dropped as filtered and one it failed on as failed, not accepted; a retry moves them again', async () => {
      const transformation = await sy.admin('POST', '/transformations', { name: 'lower', code: LOWER_V1 });
      assert.equal(transformation.status, 201, JSON.stringify(transformation.body));
      const source = await sy.createSource('overview-transformed');
      const put = await sy.admin('PUT', `/sources/${source.id}/destinations/webhooks`, {
        enabled: true,
        settings: { webhooks: [{ url: receiver.url }], transformation: { id: transformation.body.id } },
        filters: [{ title: 'no noise', if: { field: 'event', op: '=', value: 'Noise' }, action: 'drop' }],
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const events = ['Pass', 'Internal Ping', 'Nothing', 'Split', 'Boom Fixed', 'Boom Dropped', 'Boom Again', 'Noise'];
      for (const event of events) assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'u1', event, messageId: `m-${event}` })).status, 200);

      // Settled: every message but the one the destination filter dropped shows its transformation's run.
      const settled = await eventually(async () => {
        const entries = await debuggerEntries(source.id);
        return entries.length === events.length && entries.every((e) => e.message.event === 'Noise' || e.transformation !== undefined) ? entries : undefined;
      }, 20_000, 'every transformation run to be stored');
      assert.equal(settled.find((e) => e.message.event === 'Internal Ping').reason, 'transformation "lower" v1 dropped it');
      // A split message is one message received: counted once, accepted.
      await assertAgrees(settled, { accepted: 2, filtered: 3, failed: 3 });

      // A retry runs version 2 on the three that failed: each moves from failed to what it comes to now.
      assert.equal((await sy.admin('PUT', `/transformations/${transformation.body.id}`, { code: LOWER_V2 })).status, 200);
      const retried = await sy.admin('POST', '/deliveries/retry', { sourceId: source.id });
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      const after = await eventually(async () => {
        const entries = await debuggerEntries(source.id);
        return entries.filter((e) => e.message.event.startsWith('Boom')).every((e) => e.transformation?.version === 2) ? entries : undefined;
      }, 20_000, 'the retried messages to run version 2');
      const status = (event: string): string => after.find((e) => e.message.event === event).status;
      assert.deepEqual([status('Boom Fixed'), status('Boom Dropped'), status('Boom Again')], ['accepted', 'filtered', 'failed']);
      await assertAgrees(after, { accepted: 3, filtered: 4, failed: 1 });
    });
  });
}

await describeOnBothStores('overview of transformed messages', describeOverviewOfTransformations);
