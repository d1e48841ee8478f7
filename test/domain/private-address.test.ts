import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refuseLiteral } from '../../src/delivery/address-guard.js';
import { isPrivateAddress } from '../../src/domain/private-address.js';

// [address, refused, why]: every IPv6 form that carries an IPv4 address is
// judged by that address, in each spelling (dotted and hex).
const TABLE: ReadonlyArray<readonly [string, boolean, string]> = [
  ['::ffff:127.0.0.1', true, 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', true, 'IPv4-mapped loopback, hex'],
  ['0:0:0:0:0:ffff:a00:1', true, 'IPv4-mapped 10.0.0.1, written out'],
  ['::ffff:169.254.169.254', true, 'IPv4-mapped metadata'],
  ['::ffff:8.8.8.8', false, 'IPv4-mapped public'],
  ['::ffff:0:127.0.0.1', true, 'IPv4-translated loopback'],
  ['::ffff:0:7f00:1', true, 'IPv4-translated loopback, hex'],
  ['::ffff:0:a00:1', true, 'IPv4-translated 10.0.0.1'],
  ['::ffff:0:c0a8:101', true, 'IPv4-translated 192.168.1.1'],
  ['::ffff:0:808:808', false, 'IPv4-translated public'],
  ['::127.0.0.1', true, 'IPv4-compatible loopback'],
  ['::a00:1', true, 'IPv4-compatible 10.0.0.1, hex'],
  ['::a9fe:a9fe', true, 'IPv4-compatible metadata'],
  ['::2', true, 'IPv4-compatible 0.0.0.2 ("this network")'],
  ['64:ff9b::127.0.0.1', true, 'NAT64 loopback'],
  ['64:ff9b::a00:1', true, 'NAT64 10.0.0.1, hex'],
  ['64:ff9b::a9fe:a9fe', true, 'NAT64 metadata'],
  ['64:ff9b::8.8.8.8', false, 'NAT64 public'],
  ['64:ff9b:1::1', true, 'NAT64 local-use 64:ff9b:1::/48'],
  ['2002:7f00:1::', true, '6to4 of loopback'],
  ['2002:a00:1::1', true, '6to4 of 10.0.0.1'],
  ['2002:c0a8:101::1', true, '6to4 of 192.168.1.1'],
  ['2002:a9fe:a9fe::', true, '6to4 of metadata'],
  ['2002:808:808::1', false, '6to4 of a public address'],
  ['100::1', true, 'discard 100::/64'],
  ['100::ffff:ffff:ffff:ffff', true, 'discard 100::/64, last address'],
  ['::', true, 'unspecified'],
  ['::1', true, 'loopback'],
  ['2001::1', true, 'Teredo'],
  ['2001:db8::1', true, 'documentation'],
  ['2001:2::1', true, 'benchmarking'],
  ['3fff::1', true, 'documentation 3fff::/20'],
  ['fc00::1', true, 'unique local'],
  ['fd00:ec2::254', true, 'unique local, AWS metadata'],
  ['fe80::1%eth0', true, 'link-local with a zone'],
  ['fec0::1', true, 'site-local'],
  ['ff02::1', true, 'multicast'],
  ['4000::1', true, 'unassigned, outside 2000::/3'],
  ['2606:4700:4700::1111', false, 'global unicast'],
  ['2a00:1450:4001:80b::200e', false, 'global unicast'],
];

describe('private addresses: IPv6 forms', () => {
  for (const [address, refused, why] of TABLE) {
    it(`${refused ? 'refuses' : 'allows'} ${address} (${why})`, () => assert.equal(isPrivateAddress(address), refused));
  }

  it('refuses the forms as URL hosts spell them, before any connection', () => {
    for (const url of ['http://[100::1]/', 'http://[::ffff:0:7f00:1]/', 'http://[::ffff:0:a00:1]/', 'http://[::ffff:0:127.0.0.1]/', 'http://[64:ff9b::7f00:1]/', 'http://[2002:7f00:1::]/', 'http://[::127.0.0.1]/']) {
      assert.notEqual(refuseLiteral(new URL(url).hostname), undefined, url);
    }
    assert.equal(refuseLiteral(new URL('http://[2606:4700:4700::1111]/').hostname), undefined);
  });
});
