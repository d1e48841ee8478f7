import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refuseConnection } from '../../src/domain/connection-caps.js';

describe('refuseConnection', () => {
  it('admits below both caps, refuses at the total first, then at the address', () => {
    const caps = { total: 10, perAddress: 3 };
    assert.equal(refuseConnection(caps, 0, 0), undefined);
    assert.equal(refuseConnection(caps, 9, 2), undefined);
    assert.equal(refuseConnection(caps, 9, 3), 'per_address');
    assert.equal(refuseConnection(caps, 10, 0), 'total');
    assert.equal(refuseConnection(caps, 10, 3), 'total', 'the total is checked first');
  });

  it('has no cap per address at 0', () => {
    const caps = { total: 10, perAddress: 0 };
    assert.equal(refuseConnection(caps, 0, 0), undefined);
    assert.equal(refuseConnection(caps, 9, 9), undefined);
    assert.equal(refuseConnection(caps, 10, 10), 'total');
  });
});
