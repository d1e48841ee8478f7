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
