import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type TestSwitchyard, startTestSwitchyard } from '../helpers/switchyard.js';

describe('Engage definitions naming what does not exist', () => {
  let sy: TestSwitchyard;
  before(async () => (sy = await startTestSwitchyard()));
  after(async () => sy?.close());

  it('an audience reading an unknown computed trait is refused naming the field and its own key, not an id never created', async () => {
    const created = await sy.admin('POST', '/audiences', { name: 'Big spenders', definition: { computedTrait: { key: 'lifetime_value', op: '>', value: 100 } } });
    assert.equal(created.status, 400);
    assert.equal(created.body.error.code, 'invalid_definition');
    assert.equal(created.body.error.message, 'definition.computedTrait.key names no computed trait with key "lifetime_value" (in "big_spenders")');
    assert.deepEqual((await sy.admin('GET', '/audiences')).body.audiences, []);
  });
});
