import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientAddress, proxiedPeer } from '../../src/domain/client-address.js';

describe('clientAddress', () => {
  it('is the peer without a forwarded address', () => {
    assert.equal(clientAddress('127.0.0.1', undefined), '127.0.0.1');
    assert.equal(clientAddress(undefined, undefined), undefined);
  });

  it("is X-Forwarded-For's left-most entry, empty entries skipped", () => {
    assert.equal(clientAddress('10.0.0.9', '203.0.113.7, 10.0.0.2'), '203.0.113.7');
    assert.equal(clientAddress('10.0.0.9', ' , ,2001:db8::1 ,10.0.0.2'), '2001:db8::1');
    assert.equal(clientAddress('10.0.0.9', ['203.0.113.7', '10.0.0.2']), '203.0.113.7');
  });

  it('falls back to the peer when the header names no address', () => {
    assert.equal(clientAddress('10.0.0.9', ''), '10.0.0.9');
    assert.equal(clientAddress('10.0.0.9', ' , '), '10.0.0.9');
  });
});

describe('proxiedPeer', () => {
  it("is X-Forwarded-For's right-most entry (the one the nearest proxy appended), empty entries skipped", () => {
    assert.equal(proxiedPeer('10.0.0.9', 'spoofed, 203.0.113.7'), '203.0.113.7');
    assert.equal(proxiedPeer('10.0.0.9', ['spoofed', '203.0.113.7 , ']), '203.0.113.7');
    assert.equal(proxiedPeer('10.0.0.9', '2001:db8::1'), '2001:db8::1');
  });

  it('is the peer without a forwarded address', () => {
    assert.equal(proxiedPeer('10.0.0.9', undefined), '10.0.0.9');
    assert.equal(proxiedPeer('10.0.0.9', ' , '), '10.0.0.9');
    assert.equal(proxiedPeer(undefined, undefined), undefined);
  });
});
