/**
 * The write key of a Basic `Authorization` header: the user name of
 * `base64(writeKey + ":")`. Undefined when the header is absent or not Basic.
 */
export function writeKeyFromAuthorization(header: string | undefined): string | undefined {
  if (header === undefined || header.length > 1_024) return undefined;
  const match = /^basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (match === null) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const key = colon === -1 ? decoded : decoded.slice(0, colon);
  return key === '' ? undefined : key;
}
