/**
 * Standard Webhooks (standardwebhooks.com) symmetric signatures: the rules
 * that need no I/O. The HMAC itself is computed by the delivery signer.
 *
 * A secret is `whsec_` followed by the base64 of 24 to 64 random bytes; the
 * HMAC-SHA256 key is those bytes. A destination's stored settings hold the
 * current secret and, during a rotation's overlap, the previous one with the
 * time until which it still signs.
 */
export interface StandardWebhooksSettings {
  readonly secret: string;
  /** The secret before the last rotation; it still signs until `previousValidUntil`. */
  readonly previousSecret?: string | undefined;
  /** Epoch milliseconds. */
  readonly previousValidUntil?: number | undefined;
}

export const SECRET_PREFIX = 'whsec_';
/** What GET shows instead of the secret; sending it back in a PUT keeps the stored secret. */
export const MASKED_STANDARD_SECRET = `${SECRET_PREFIX}********`;
export const MIN_SECRET_BYTES = 24;
export const MAX_SECRET_BYTES = 64;
/** Default overlap of a rotation: a day, as the spec's libraries suggest for zero-downtime rotation. */
export const DEFAULT_OVERLAP_SECONDS = 86_400;
export const MAX_OVERLAP_SECONDS = 30 * 86_400;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The HMAC key of a secret, or a problem naming `at`. */
export function secretKey(secret: unknown, at: string): Uint8Array | string {
  if (typeof secret !== 'string' || !secret.startsWith(SECRET_PREFIX)) {
    return `${at} must be a Standard Webhooks secret: "whsec_" followed by base64 (to keep the stored one, send the mask GET shows, "${MASKED_STANDARD_SECRET}"; {} makes a new one)`;
  }
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (encoded.length > 200 || !BASE64.test(encoded) || encoded.length % 4 !== 0) return `${at} must be "whsec_" followed by base64`;
  const key = Buffer.from(encoded, 'base64');
  if (key.length < MIN_SECRET_BYTES || key.length > MAX_SECRET_BYTES) {
    return `${at} must encode ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes (got ${key.length})`;
  }
  return key;
}

/** Serializes random key bytes as a secret. */
export function formatSecret(key: Uint8Array): string {
  return SECRET_PREFIX + Buffer.from(key).toString('base64');
}

/** Parses stored (or already completed) settings; the problem names the field. */
export function parseStandardWebhooks(input: unknown, at: string): StandardWebhooksSettings | string {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return `${at} must be an object with a "secret"`;
  const record = input as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (key !== 'secret' && key !== 'previousSecret' && key !== 'previousValidUntil') {
      return `${at} has an unknown field "${key.slice(0, 60)}"; allowed: secret`;
    }
  }
  const key = secretKey(record['secret'], `${at}.secret`);
  if (typeof key === 'string') return key;
  const secret = record['secret'] as string;
  const previous = record['previousSecret'];
  const until = record['previousValidUntil'];
  if (previous === undefined && until === undefined) return { secret };
  const previousKey = secretKey(previous, `${at}.previousSecret`);
  if (typeof previousKey === 'string') return previousKey;
  if (typeof until !== 'number' || !Number.isSafeInteger(until)) return `${at}.previousValidUntil must be epoch milliseconds`;
  return { secret, previousSecret: previous as string, previousValidUntil: until };
}

/**
 * The secrets that sign an attempt made at `now`: the current one first, then
 * the previous one while its overlap lasts.
 */
export function signingSecrets(settings: StandardWebhooksSettings, now: number): readonly string[] {
  if (settings.previousSecret !== undefined && settings.previousValidUntil !== undefined && now < settings.previousValidUntil) {
    return [settings.secret, settings.previousSecret];
  }
  return [settings.secret];
}

/** What is signed: `<id>.<timestamp>.<body>`. */
export function signedContent(id: string, timestampSeconds: number, body: string): string {
  return `${id}.${timestampSeconds}.${body}`;
}

/**
 * The `webhook-id` of a message: its `messageId`, which stays the same on
 * every retry and replay. The spec asks that an id never contain "." (the
 * separator of the signed content), and a messageId comes from the client,
 * so one that is not a plain token is replaced by a stable digest of itself
 * (`sy_` + 43 base64url characters) computed by the caller's `digest`.
 */
export function webhookId(messageId: string | undefined, digest: (text: string) => string): string {
  if (messageId !== undefined && SAFE_ID.test(messageId)) return messageId;
  return `sy_${digest(messageId ?? '')}`;
}

/** Printable ASCII without "." or spaces, at most 256 characters. */
const SAFE_ID = /^[\x21-\x2d\x2f-\x7e]{1,256}$/;
