import { isIP } from 'node:net';

/**
 * Whether a listen address takes connections on every interface of the
 * machine (the unspecified address, `0.0.0.0` or `::`, in any spelling),
 * rather than on one address such as 127.0.0.1.
 */
export function listensOnEveryInterface(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare) === 4) return bare.split('.').every((part) => Number(part) === 0);
  if (isIP(bare) === 6) return /^[0:]+$/.test(bare);
  return false;
}
