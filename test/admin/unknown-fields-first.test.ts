import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

const CODE = 'export function transformEvent(e) { return e; }';
const FUNCTION = 'async function onTrack() {}';

describe('an unknown field is named before a missing one', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy?.close();
  });

  const refused = async (method: string, route: string, body: unknown, field: string, meant: string): Promise<void> => {
    const answer = await sy.admin(method, route, body);
    assert.equal(answer.status, 400, JSON.stringify(answer.body));
    assert.equal(answer.body.error.code, 'invalid_request', JSON.stringify(answer.body));
    assert.match(answer.body.error.message, new RegExp(`unknown field "${field}" \\(did you mean "${meant}"\\?\\)`), `${method} ${route}: ${answer.body.error.message}`);
  };

  it('on the transformation routes', async () => {
    await refused('POST', '/transformations', { name: 'n', cdoe: CODE }, 'cdoe', 'code');
    const created = await sy.admin('POST', '/transformations', { name: 'n', code: CODE });
    assert.equal(created.status, 201);
    await refused('PUT', `/transformations/${created.body.id}`, { cdoe: CODE }, 'cdoe', 'code');
    await refused('POST', '/transformations/test', { code: CODE, evnets: [{}] }, 'evnets', 'events');
  });

  it('on the function destination routes', async () => {
    const source = await sy.createSource('functions');
    await refused('POST', `/sources/${source.id}/destinations/functions`, { name: 'Chat', cdoe: FUNCTION }, 'cdoe', 'code');
    const created = await sy.admin('POST', `/sources/${source.id}/destinations/functions`, { name: 'Chat', code: FUNCTION });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await refused('PUT', `/sources/${source.id}/destinations/functions/${created.body.id}`, { enabeld: false }, 'enabeld', 'enabled');
    await refused('POST', '/functions/test', { cdoe: FUNCTION, events: [{}] }, 'cdoe', 'code');
  });

  it('still says what is missing when nothing is unknown', async () => {
    const answer = await sy.admin('POST', '/transformations', { name: 'n' });
    assert.equal(answer.status, 400);
    assert.match(answer.body.error.message, /^code /);
  });
});
