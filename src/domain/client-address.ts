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
