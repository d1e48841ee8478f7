import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, eventually, startTestSwitchyard } from '../helpers/switchyard.js';

type Warning = { where: string; field: string; closest?: string; message: string };

describe('saving a tracking plan warns of required fields no recent message has', () => {
  let sy: TestSwitchyard;
  before(async () => {
    sy = await startTestSwitchyard();
  });
  after(async () => {
    await sy?.close();
  });

  it('names each such field and the closest observed one, and saves the plan all the same', async () => {
    const source = await sy.createSource('typos');
    for (let i = 0; i < 3; i++) {
      assert.equal((await sy.send('/v1/track', source.writeKey, { userId: `u${i}`, event: 'Order Completed', properties: { revenue: 10, product: { sku: 's' } } })).status, 200);
    }
    assert.equal((await sy.send('/v1/identify', source.writeKey, { userId: 'u1', traits: { email: 'a@example.com' } })).status, 200);
    await eventually(async () => {
      const observed = (await sy.admin('GET', `/sources/${source.id}/schema`)).body as { events: { event: string | null }[] };
      return observed.events.some((e) => e.event === 'Order Completed') ? true : undefined;
    }, 10_000, 'the observed schema');

    const plan = {
      events: {
        'Order Completed': {
          properties: { type: 'object', properties: { product: { type: 'object', required: ['sku', 'skuu'] } }, required: ['revenu', 'revenue', 'product'] },
        },
        'Signed Up': { properties: { type: 'object', required: ['plan'] } },
      },
      identify: { traits: { type: 'object', required: ['emial'] } },
      common: { required: ['userID', 'type'] },
      controls: { violations: 'block' },
    };
    const saved = await sy.admin('PUT', `/sources/${source.id}/tracking-plan`, plan);
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    const warnings = saved.body.warnings as Warning[];
    const found = warnings.map(({ where, field, closest }) => ({ where, field, closest }));
    assert.deepEqual(
      found.sort((a, b) => a.field.localeCompare(b.field)),
      [
        { where: 'identify traits', field: 'emial', closest: 'email' },
        { where: 'event "Order Completed"', field: 'product.skuu', closest: 'product.sku' },
        { where: 'event "Order Completed"', field: 'revenu', closest: 'revenue' },
        { where: 'common', field: 'userID', closest: 'userId' },
      ].sort((a, b) => a.field.localeCompare(b.field)),
    );
    const common = warnings.find((w) => w.field === 'userID')!;
    assert.match(common.message, /"userID".*none of the 4 messages/);
    assert.match(common.message, /did you mean "userId"\?/);
    assert.equal((await sy.admin('GET', `/sources/${source.id}/tracking-plan`)).body.version, saved.body.version, 'saved all the same');
  });

  it('has no warnings on a source without recent traffic, or for fields it has', async () => {
    const quiet = await sy.createSource('quiet');
    const created = await sy.admin('POST', `/sources/${quiet.id}/tracking-plan`, { events: {}, common: { required: ['userID'] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body.warnings, []);

    const busy = await sy.createSource('busy');
    assert.equal((await sy.send('/v1/track', busy.writeKey, { userId: 'u', event: 'A', properties: { n: 1 } })).status, 200);
    await eventually(async () => ((await sy.admin('GET', `/sources/${busy.id}/schema`)).body.events.length > 0 ? true : undefined), 10_000, 'the observed schema');
    const fine = await sy.admin('POST', `/sources/${busy.id}/tracking-plan`, { events: { A: { properties: { type: 'object', required: ['n'] } } }, common: { required: ['userId', 'messageId'] } });
    assert.equal(fine.status, 201, JSON.stringify(fine.body));
    assert.deepEqual(fine.body.warnings, []);
  });
});
