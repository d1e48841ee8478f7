import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientAddress, proxiedPeer, shareKey } from '../../src/domain/client-address.js';

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

describe('shareKey', () => {
  it('keys IPv6 by its /64, IPv4-mapped IPv6 as IPv4, anything else as it is', () => {
    assert.equal(shareKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(shareKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
    assert.equal(shareKey('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(shareKey('::ffff:cb00:7107'), '203.0.113.7');
    assert.equal(shareKey('203.0.113.7'), '203.0.113.7');
    assert.equal(shareKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
    assert.equal(shareKey('not an address'), 'not an address');
    assert.equal(shareKey(undefined), '');
  });

  it('leaves out a port a proxy wrote after the address, so that a client\'s source ports share one key', () => {
    assert.equal(shareKey('203.0.113.7:51234'), '203.0.113.7');
    assert.equal(shareKey('203.0.113.7:51235'), shareKey('203.0.113.7:51234'));
    assert.equal(shareKey('[2001:db8:1:2::9]:443'), '2001:db8:1:2::/64');
    assert.equal(shareKey('[2001:db8:1:2::9]'), '2001:db8:1:2::/64');
    assert.equal(shareKey('[::ffff:203.0.113.7]:80'), '203.0.113.7');
  });
});
