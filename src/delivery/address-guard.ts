import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { isIpLiteral, isPrivateAddress } from '../domain/private-address.js';

/**
 * The SSRF guard: receivers may not reach loopback, private, link-local or
 * metadata addresses unless private receivers are allowed. Checked when
 * settings are saved and again on every new connection, because DNS answers
 * change (DNS rebinding): the connection is made to the very address that
 * passed the check, never to a second lookup's answer.
 */
export class PrivateAddressError extends Error {
  override readonly name = 'PrivateAddressError';
  readonly code = 'ERR_PRIVATE_ADDRESS';

  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`private address refused: ${host} resolves to ${address}`);
  }
}

/** The host of a URL's hostname without IPv6 brackets. */
export function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** The refusal for an IP-literal host, which sockets connect to without any lookup; undefined for names and public addresses. */
export function refuseLiteral(hostname: string): PrivateAddressError | undefined {
  const host = bareHost(hostname);
  return isIpLiteral(host) && isPrivateAddress(host) ? new PrivateAddressError(host, host) : undefined;
}

/**
 * A `lookup` for `net.connect`/`tls.connect` that resolves as usual and fails
 * with {@link PrivateAddressError} when any answer is private, so a name
 * with one public and one private address cannot be used to reach the
 * private one. Answers in the shape the caller asked for (`all` or not).
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { family: options.family ?? 0, hints: options.hints, all: true }, (error, addresses) => {
    if (error !== null) {
      callback(error, '');
      return;
    }
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused !== undefined) {
      callback(new PrivateAddressError(hostname, refused.address), '');
      return;
    }
    if (addresses.length === 0) {
      callback(Object.assign(new Error(`no addresses for ${hostname}`), { code: 'ENOTFOUND' }), '');
    } else if (options.all === true) {
      callback(null, addresses);
    } else {
      callback(null, addresses[0]!.address, addresses[0]!.family);
    }
  });
};

export type ResolveAll = (hostname: string) => Promise<readonly string[]>;

/** Every address a name resolves to (what `getaddrinfo` answers, /etc/hosts included). */
export const resolveAll: ResolveAll = async (hostname) =>
  (await dns.promises.lookup(hostname, { all: true })).map((a) => a.address);

/**
 * The first private address `hostname` resolves to, or undefined when all are
 * public. Rejects when the name does not resolve (the caller words that).
 */
export async function findPrivateAddress(hostname: string, resolve: ResolveAll = resolveAll): Promise<string | undefined> {
  const host = bareHost(hostname);
  if (isIpLiteral(host)) return isPrivateAddress(host) ? host : undefined;
  return (await resolve(host)).find((address) => isPrivateAddress(address));
}
