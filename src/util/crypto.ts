import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** One-shot hashing: no Hash object per call (write keys are hashed on every request). */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}

/** A random string of `length` characters from [A-Za-z0-9], without modulo bias. */
export function randomToken(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 * 62: bytes at or above it would favour the first characters.
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

/**
 * Compares two secrets in time that depends only on their lengths' maximum,
 * not on where they first differ. Both sides are hashed first so that
 * inputs of different lengths are compared in constant time too.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a).digest();
  const right = createHash('sha256').update(b).digest();
  return timingSafeEqual(left, right) && a.length === b.length;
}
