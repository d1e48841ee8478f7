import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { type TestReceiver, startReceiver } from '../helpers/receiver.js';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

/** Segment's shape for a deletion request: onDelete calls the tool's API to erase the user. */
const ERASER = `
async function onTrack(event, settings) {
  await fetch(settings.url + '/track/' + event.userId, { method: 'POST', body: JSON.stringify(event) });
}
async function onDelete(event, settings) {
  const res = await fetch(settings.url + '/users/' + encodeURIComponent(event.userId), { method: 'DELETE', headers: { Authorization: 'Bearer ' + settings.apiKey } });
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

let sy: TestSwitchyard;
let receiver: TestReceiver;
before(async () => {
  receiver = await startReceiver();
  sy = await startTestSwitchyard({ 'allow-private-receivers': 'true' });
});
after(async () => {
  await sy?.close();
  await receiver?.close();
});

it('a deletion request reaches each enabled function destination as onDelete, without a Webhooks destination', { timeout: 60_000 }, async () => {
  const source = await sy.createSource('erasure-fn');
  const other = await sy.createSource('erasure-fn-off');
  const add = async (sourceId: string, name: string, enabled: boolean) => {
    const created = await sy.admin('POST', `/sources/${sourceId}/destinations/functions`, { name, code: ERASER, settings: { url: receiver.url, apiKey: `sk_${name}` }, enabled });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id as string;
  };
  const crm = await add(source.id, 'CRM', true);
  const mailer = await add(source.id, 'Mailer', true);
  const off = await add(other.id, 'Disabled', false);
  assert.equal((await sy.send('/v1/track', source.writeKey, { userId: 'dana', event: 'Viewed' })).status, 200);
  await eventually(() => (receiver.requests.filter((r) => r.path === '/hook/track/dana').length === 2 ? true : undefined), 15_000, 'the track through both functions');

  const created = await sy.admin('POST', '/regulations', { regulationType: 'DELETE_ONLY', subjectType: 'USER_ID', subjectIds: ['dana', 'eve'] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const deletes = await eventually(() => {
    const got = receiver.requests.filter((r) => r.method === 'DELETE');
    return got.length >= 4 ? got : undefined;
  }, 20_000, 'a DELETE per user and function');
  assert.deepEqual(deletes.map((r) => `${r.path} ${r.headers.authorization}`).sort(), [
    '/hook/users/dana Bearer sk_CRM',
    '/hook/users/dana Bearer sk_Mailer',
    '/hook/users/eve Bearer sk_CRM',
    '/hook/users/eve Bearer sk_Mailer',
  ]);

  // Each is a delivery of the function, succeeded, of a `delete` message (dana's track went with her messages); the disabled function (on the other source) has none.
  const listed = await eventually(async () => {
    const { body } = await sy.admin('GET', `/deliveries?sourceId=${source.id}&limit=100`);
    const done = (body.deliveries as Array<{ functionId?: string; status: string; id: string }>).filter((d) => d.functionId !== undefined && d.status === 'succeeded');
    return done.length === 4 ? done : undefined;
  }, 15_000, 'the function deliveries succeeded');
  const byFunction = new Map<string, number>();
  for (const d of listed) byFunction.set(d.functionId!, (byFunction.get(d.functionId!) ?? 0) + 1);
  assert.deepEqual(Object.fromEntries(byFunction), { [crm]: 2, [mailer]: 2 });
  const debuggerView = await sy.admin('GET', `/sources/${source.id}/debugger`);
  assert.deepEqual(
    (debuggerView.body.messages as Array<{ type: string; message: { userId: string } }>).map((m) => `${m.type} ${m.message.userId}`).sort(),
    ['delete dana', 'delete eve'],
    "dana's track is erased; the deletes stay",
  );
  const otherDeliveries = await sy.admin('GET', `/deliveries?sourceId=${other.id}&limit=100`);
  assert.ok(!(otherDeliveries.body.deliveries as Array<{ functionId?: string }>).some((d) => d.functionId === off));
  assert.equal(receiver.requests.filter((r) => r.headers.authorization === 'Bearer sk_Disabled').length, 0);
});
