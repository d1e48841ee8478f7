import { parseIpv6 } from './private-address.js';

/**
 * The address a request came from: with proxies trusted, the left-most
 * entry of `X-Forwarded-For` (the client as the first proxy saw it; empty
 * entries skipped, as proxy-addr and so Fastify do), else the connection's
 * peer. Undefined when neither is known (the socket is already gone).
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined): string | undefined {
  // Node joins a repeated X-Forwarded-For into one string; a list is read the same way.
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
  if (header !== undefined) {
    for (const entry of header.split(',')) {
      const address = entry.trim();
      if (address !== '') return address;
    }
  }
  return peer;
}

/**
 * The address that connected to the nearest trusted proxy: with proxies
 * trusted, the right-most entry of `X-Forwarded-For` (the one that proxy
 * appended, which a client cannot write), else the connection's peer.
 * Resources are shared out by this address, not by {@link clientAddress}:
 * the left-most entry is whatever the client sent, so a client could take
 * another's share, or a share per request. Behind several proxies it is the
 * outer proxy's address, shared by the clients that come through it.
 */
export function proxiedPeer(peer: string | undefined, forwardedFor: string | string[] | undefined): string | undefined {
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
  if (header !== undefined) {
    const entries = header.split(',');
    for (let i = entries.length - 1; i >= 0; i--) {
      const address = entries[i]!.trim();
      if (address !== '') return address;
    }
  }
  return peer;
}

/**
 * The key an address's share of a resource is counted under: an IPv6
 * address by its /64 (one host or subscriber is given a whole /64, so
 * keying by the address would give it as many shares as it likes), an
 * IPv4-mapped one as its IPv4 address, anything else as it is. A port
 * that a proxy wrote after the address (`203.0.113.7:51234`,
 * `[2001:db8::1]:443`, as some load balancers append to
 * `X-Forwarded-For`) is left out: with it, each of a client's source ports
 * would be a share of its own.
 */
export function shareKey(address: string | undefined): string {
  if (address === undefined) return '';
  // What a dual-stack listener reports for every IPv4 client, on every request: no parse needed.
  if (address.startsWith('::ffff:') && address.includes('.')) return address.slice(7);
  address = withoutPort(address);
  const groups = address.includes(':') ? parseIpv6(address) : undefined;
  if (groups === undefined) return address;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >>> 8}.${groups[6]! & 255}.${groups[7]! >>> 8}.${groups[7]! & 255}`;
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** `address` without a port written after it: `[v6]:port` and `[v6]` lose their brackets, `v4:port` its port (IPv6 alone has two colons or more). */
function withoutPort(address: string): string {
  if (address.startsWith('[')) {
    const end = address.indexOf(']');
    return end === -1 ? address : address.slice(1, end);
  }
  const colon = address.indexOf(':');
  return colon !== -1 && colon === address.lastIndexOf(':') ? address.slice(0, colon) : address;
}
