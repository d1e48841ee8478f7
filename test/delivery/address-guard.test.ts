import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { describe, it } from 'node:test';
import { PrivateAddressError, findPrivateAddress, guardedLookup, refuseLiteral } from '../../src/delivery/address-guard.js';
import { isPrivateAddress } from '../../src/domain/private-address.js';

describe('private addresses', () => {
  const refused = [
    '127.0.0.1', '127.255.255.254', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254',
    '100.64.0.1', '100.127.255.255', '0.0.0.0', '192.0.0.192', '198.18.0.1', '224.0.0.1', '255.255.255.255',
    '::', '::1', '[::1]', 'fc00::1', 'fd00:ec2::254', 'fe80::1', 'fe80::1%eth0', 'ff02::1', '::ffff:127.0.0.1',
    '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:a00:1', '64:ff9b::10.0.0.1', '2002:7f00:1::', '2001::1', '2001:db8::1',
    '::127.0.0.1', 'not an address', '',
  ];
  const allowed = ['93.184.215.14', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::'];

  for (const address of refused) {
    it(`refuses ${JSON.stringify(address)}`, () => assert.equal(isPrivateAddress(address), true));
  }
  for (const address of allowed) {
    it(`allows ${address}`, () => assert.equal(isPrivateAddress(address), false));
  }

  it('refuses private IP literals before any connection, as URLs spell them', () => {
    for (const url of ['http://127.0.0.1/', 'http://[::1]:8080/', 'http://0x7f.1/', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/', 'http://[fd00:ec2::254]/']) {
      assert.ok(refuseLiteral(new URL(url).hostname) instanceof PrivateAddressError, url);
    }
    assert.equal(refuseLiteral('93.184.215.14'), undefined);
    assert.equal(refuseLiteral('example.com'), undefined, 'names are checked when they are resolved');
  });

  it('refuses a name when any of its addresses is private', async () => {
    const resolve = async (): Promise<string[]> => ['93.184.215.14', '10.0.0.5'];
    assert.equal(await findPrivateAddress('mixed.example', resolve), '10.0.0.5');
    assert.equal(await findPrivateAddress('public.example', async () => ['93.184.215.14']), undefined);
    assert.equal(await findPrivateAddress('[::1]', resolve), '::1');
  });

  it('makes the socket lookup fail for a name that resolves to loopback, in both answer shapes', async () => {
    for (const all of [true, false]) {
      const error = await new Promise<unknown>((resolve) => {
        guardedLookup('localhost', { all }, (err: unknown) => resolve(err));
      });
      assert.ok(error instanceof PrivateAddressError, `all: ${all}`);
      assert.match(error.message, /private address refused: localhost resolves to/);
    }
  });

  it('passes a public answer through in the shape asked for', async () => {
    // A numeric host resolves without DNS, so this touches no network.
    const answer = await new Promise<LookupAddress[]>((resolve, reject) => {
      guardedLookup('93.184.215.14', { all: true }, (err, addresses) => (err === null ? resolve(addresses as LookupAddress[]) : reject(err)));
    });
    assert.deepEqual(answer, [{ address: '93.184.215.14', family: 4 }]);
  });
});
