import { createHmac } from 'node:crypto';

/**
 * The `X-Signature` of a webhook body: hex HMAC-SHA1 of the exact body bytes
 * keyed with the destination's shared secret, as Segment's Webhooks
 * destination signs. Computed once per body, whatever the receiver count.
 */
export function signBody(body: string, sharedSecret: string): string {
  return createHmac('sha1', sharedSecret).update(body, 'utf8').digest('hex');
}
