import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

/** The docs' split example: each part gets its own messageId. */
const SPLIT = `export function transformEvent(event) {
  log(event.receivedAt, event.timestamp);
  return [1, 2].map((n, i) => ({ ...event, messageId: event.messageId + ':' + i, n }));
}`;

const LOGGER = `async function onTrack(event) { console.log(event.messageId, event.receivedAt, event.timestamp); }`;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('test runs see an event as ingest would have stored it', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy?.close();
  });

  it('fills messageId, receivedAt and timestamp in a transformation test, and says so', async () => {
    const answer = await sy.admin('POST', '/transformations/test', { code: SPLIT, events: [{ type: 'track', userId: 'u1', event: 'Order', properties: {} }] });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const [result] = answer.body.results;
    assert.deepEqual(Object.keys(result.filled).sort(), ['messageId', 'receivedAt', 'timestamp']);
    assert.equal(typeof result.filled.messageId, 'string');
    assert.match(result.filled.receivedAt, ISO);
    assert.equal(result.filled.timestamp, result.filled.receivedAt, 'no client timestamp: the time it was received, as ingest stamps it');
    assert.deepEqual(
      result.output.map((part: { messageId: string }) => part.messageId),
      [`${result.filled.messageId}:0`, `${result.filled.messageId}:1`],
    );
    assert.deepEqual(result.logs, [`${result.filled.receivedAt} ${result.filled.timestamp}`]);
    assert.equal(result.input.messageId, undefined, 'input is the event as given');
    assert.equal(result.ingestRejects, undefined);
  });

  it("keeps the caller's own values, filling only what is missing", async () => {
    const stored = { type: 'track', userId: 'u1', event: 'Order', messageId: 'm-1', timestamp: '2024-01-01T00:00:00Z', sentAt: '2024-01-01T00:00:05Z', receivedAt: '2024-01-01T00:00:07.000Z' };
    const answer = await sy.admin('POST', '/transformations/test', { code: SPLIT, events: [stored] });
    const [result] = answer.body.results;
    assert.deepEqual(result.filled, { originalTimestamp: '2024-01-01T00:00:00Z' });
    assert.equal(result.output[0].messageId, 'm-1:0');
    assert.equal(result.output[0].timestamp, '2024-01-01T00:00:00Z');
    assert.equal(result.output[0].receivedAt, '2024-01-01T00:00:07.000Z');
    assert.deepEqual(result.logs, ['2024-01-01T00:00:07.000Z 2024-01-01T00:00:00Z']);
  });

  it('runs an event ingest would reject, filled alike, naming why ingest would', async () => {
    const answer = await sy.admin('POST', '/transformations/test', { code: SPLIT, events: [{ type: 'track', event: 'Order', properties: {} }] });
    const [result] = answer.body.results;
    assert.equal(result.ingestRejects, 'neither userId nor anonymousId');
    assert.equal(result.output[0].messageId, `${result.filled.messageId}:0`);
  });

  it('fills them in a function destination test too', async () => {
    const answer = await sy.admin('POST', '/functions/test', { code: LOGGER, events: [{ type: 'track', userId: 'u1', event: 'Order', properties: {} }] });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const [result] = answer.body.results;
    assert.equal(result.outcome, 'delivered');
    assert.deepEqual(Object.keys(result.filled).sort(), ['messageId', 'receivedAt', 'timestamp']);
    assert.deepEqual(result.logs, [`${result.filled.messageId} ${result.filled.receivedAt} ${result.filled.timestamp}`]);
  });
});
