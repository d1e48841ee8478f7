import { type KeyObject, createHash, createHmac, createSecretKey } from 'node:crypto';
import { type StandardWebhooksSettings, secretKey, signedContent, signingSecrets, webhookId } from '../domain/standard-webhooks.js';

/**
 * The `X-Signature` of a webhook body: hex HMAC-SHA1 of the exact body bytes
 * keyed with the destination's shared secret, as Segment's Webhooks
 * destination signs. Computed once per body, whatever the receiver count.
 */
export function signBody(body: string, sharedSecret: string): string {
  return createHmac('sha1', keyFor(sharedSecret)).update(body, 'utf8').digest('hex');
}

/**
 * Shared secrets as KeyObjects, made once per secret: from a string, every
 * HMAC re-encodes the key first (about a fifth of the cost of signing a
 * webhook body). Destinations are few; the bound only stops growth when
 * secrets change over a long run.
 */
const keys = new Map<string, KeyObject>();
const MAX_CACHED_KEYS = 1_000;

function keyFor(secret: string): KeyObject {
  let key = keys.get(secret);
  if (key === undefined) {
    if (keys.size >= MAX_CACHED_KEYS) keys.clear();
    key = createSecretKey(Buffer.from(secret, 'utf8'));
    keys.set(secret, key);
  }
  return key;
}

/** One Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`. */
export function standardSignature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = secretKey(secret, 'secret');
  if (typeof key === 'string') throw new Error(key);
  return `v1,${createHmac('sha256', key).update(signedContent(id, timestampSeconds, body), 'utf8').digest('base64')}`;
}

/**
 * The three Standard Webhooks headers of one attempt made at `now`. During a
 * rotation's overlap the signature header lists the new secret's signature
 * first, then the previous one's, separated by a space.
 */
export function standardWebhookHeaders(
  settings: StandardWebhooksSettings,
  messageId: string | undefined,
  body: string,
  now: number,
): Record<string, string> {
  const id = webhookId(messageId, (text) => createHash('sha256').update(text, 'utf8').digest('base64url'));
  const timestamp = Math.floor(now / 1000);
  const signatures = signingSecrets(settings, now).map((secret) => standardSignature(secret, id, timestamp, body));
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
}
