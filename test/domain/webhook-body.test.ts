import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isJsonObject } from '../../src/domain/message.js';
import { splicedWebhookBody, webhookBody, webhookPayload } from '../../src/domain/webhook-payload.js';
import { seededRandom as seeded } from '../helpers/seeded-random.js';

/** The body the long way: parse, map, write out again (what every webhook body must equal, byte for byte). */
function reference(stored: string): string | undefined {
  let message: unknown;
  try {
    message = JSON.parse(stored);
  } catch {
    return undefined;
  }
  return isJsonObject(message) ? JSON.stringify(webhookPayload(message)) : undefined;
}

/** Checks one stored text both ways; resolves whether the spliced way applied. */
function check(stored: string): boolean {
  const spliced = splicedWebhookBody(stored);
  const expected = reference(stored);
  if (spliced !== undefined) assert.equal(spliced, expected, `spliced body differs for ${JSON.stringify(stored)}`);
  assert.equal(webhookBody(stored), expected, `webhook body differs for ${JSON.stringify(stored)}`);
  return spliced !== undefined;
}

const context = { library: { name: 'analytics-node', version: '3.1.0' }, locale: 'de-DE', userAgent: 'Mozilla/5.0 (X11; Linux x86_64)' };
const stamps = { timestamp: '2026-01-01T00:00:00.000Z', receivedAt: '2026-01-01T00:00:00.100Z', originalTimestamp: '2026-01-01T00:00:00.000Z' };

describe('webhook body spliced from the stored text', () => {
  it('applies to the calls ingest stores, byte for byte the same as parsing and re-writing them', () => {
    const messages = [
      { messageId: 'm1', userId: 'u1', event: 'Order Completed', properties: { total: 129.99, tax: 8.49, discount: 10, products: [{ sku: 'a', price: 119.99, quantity: 1 }] }, context, ...stamps, type: 'track' },
      { messageId: 'm2', userId: null, anonymousId: 'a1', event: 'E', properties: {}, context, ...stamps, type: 'track' },
      { messageId: 'm3', userId: 'u1', traits: { name: 'Ada', email: 'ada@example.com', logins: 3 }, context, ...stamps, type: 'identify' },
      { messageId: 'm4', userId: 'u1', groupId: 'g1', traits: { name: 'Acme' }, context, ...stamps, type: 'group' },
      { messageId: 'm5', userId: 'u1', name: 'Dashboard', properties: {}, context, ...stamps, type: 'screen' },
      // A client's own version is left out (first, in the middle, last).
      { version: 2, messageId: 'm6', userId: 'u1', event: 'E', properties: {}, type: 'track' },
      { messageId: 'm7', userId: 'u1', version: 2, event: 'E', properties: {}, type: 'track' },
      { messageId: 'm8', userId: 'u1', event: 'E', properties: {}, type: 'track', version: '2' },
      // What JSON.stringify writes unescaped, and the escapes it writes.
      { userId: 'ü €\u2028\u2029\u007f', event: 'q"b\\s\n\r\t\b\f', properties: { 'k"ey': 'v', '': '', 'a1': 1 }, type: 'track' },
      { userId: 'C:\\Users\\u0041\\', event: '\\\\n', properties: { path: '\\/' }, type: 'track' },
      { userId: 'u', event: 'E', properties: { big: 123456789012345, neg: -5, zero: 0, small: 0.000001, exp: 1e21, tiny: 1.5e-7, frac: -0.5 }, type: 'track' },
      { userId: 'u', event: 'E', properties: { nested: { deeper: [[], {}, [1, [2, { x: null }]], true, false] } }, type: 'track' },
    ];
    for (const message of messages) assert.ok(check(JSON.stringify(message)), `not spliced: ${JSON.stringify(message)}`);
    assert.equal(
      webhookBody(JSON.stringify({ userId: 'u', version: 7, event: 'E', properties: {}, type: 'track' })),
      '{"version":1,"userId":"u","event":"E","properties":{},"type":"track"}',
    );
  });

  it('leaves to the long way what it cannot splice, with the same result', () => {
    const texts = [
      // Not written as JSON.stringify writes it.
      '{"userId":"u", "event":"E","properties":{},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":1.0},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":1E3},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":-0},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":0.10},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":12345678901234567890},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":1e400},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"n":01},"type":"track"}',
      '{"userId":"\\u0041","event":"E","properties":{},"type":"track"}',
      '{"userId":"a\\/b","event":"E","properties":{},"type":"track"}',
      '{"userId":"a\\\\\\u0041","event":"E","properties":{},"type":"track"}',
      '{"userId":"\ud83d\ude00","event":"E","properties":{},"type":"track"}',
      '{"userId":"\ud83d","event":"E","properties":{},"type":"track"}',
      // Keys that a parsed object would keep once, or put first.
      '{"userId":"u","event":"E","properties":{"a":1,"a":2},"type":"track"}',
      '{"userId":"u","event":"E","properties":{},"type":"track","userId":"v"}',
      '{"userId":"u","event":"E","properties":{"b":1,"7":2},"type":"track"}',
      '{"userId":"u","event":"E","properties":{},"type":"track","0":1}',
      '{"userId":"u","event":"E","properties":{"__proto__":{"x":1}},"type":"track"}',
      // Fields the payload would add or replace, and types it maps otherwise.
      '{"event":"E","properties":{},"type":"track"}',
      '{"userId":"u","properties":{},"type":"track"}',
      '{"userId":"u","event":"E","type":"track"}',
      '{"userId":"u","event":"E","properties":[],"type":"track"}',
      '{"userId":"u","event":"E","properties":null,"type":"track"}',
      '{"userId":"u","type":"identify"}',
      '{"userId":"u","traits":"x","type":"identify"}',
      '{"userId":"u","traits":{},"type":"group"}',
      '{"userId":"u","context":{},"type":"screen"}',
      '{"userId":"u","properties":{},"context":{"page":{"url":"https://x/"}},"type":"page"}',
      '{"userId":"u","previousId":"p","type":"alias"}',
      '{"userId":"u","type":"delete"}',
      '{"userId":"u","event":"E","properties":{},"type":"toString"}',
      '{"userId":"u","event":"E","properties":{},"type":"tr\\nack"}',
      '{"userId":"u","event":"E","properties":{}}',
      '{"userId":"u","event":"E","properties":{},"type":7}',
      // Not a JSON object at all.
      '',
      '[]',
      'null',
      '{}',
      '{"userId":"u","event":"E","properties":{},"type":"track"} ',
      '{"userId":"u","event":"E","properties":{},"type":"track"',
      '{"userId":"u","event":"E","properties":{,},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"a":tru},"type":"track"}',
      '{"userId":"u","event":"E","properties":{"a":[1,]},"type":"track"}',
      `{"userId":"u","event":"E","properties":${'['.repeat(100)}${']'.repeat(100)},"type":"track"}`,
    ];
    for (const text of texts) assert.equal(check(text), false, `spliced, but should not have been: ${text}`);
  });

  it('agrees with the long way on thousands of generated messages and their mangled texts', () => {
    const random = seeded(20261125);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    // Mostly what JSON.stringify writes as it is, now and then what it writes otherwise (escaped, reordered).
    const keys = ['a', 'b', 'userId', 'event', 'type', 'version', 'properties', 'traits', 'k"q', 'é', '', 'name', 'groupId', 'context'];
    const oddKeys = ['1', '01', '__proto__'];
    const strings = ['', 'x', 'ü', '"', '\\', '\n', '\u007f', '\u2028', '/', 'track', 'identify'];
    const oddStrings = ['\u0001', '\ud83d\ude00', '\ud83d'];
    const key = (): string => (random() < 0.02 ? pick(oddKeys) : pick(keys));
    const string = (): string => (random() < 0.02 ? pick(oddStrings) : pick(strings));
    const numbers = [0, -0, 1, -1, 0.1, 1.5e-7, 1e21, 123456789012345, 1234567890123456800, 3.14159, -2.5, 1e-6];
    const value = (depth: number): unknown => {
      const roll = random();
      if (depth > 3 || roll < 0.3) return string();
      if (roll < 0.5) return pick(numbers);
      if (roll < 0.55) return pick([true, false, null]);
      if (roll < 0.75) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1));
      return object(depth + 1);
    };
    const object = (depth: number): Record<string, unknown> => {
      const out: Record<string, unknown> = {};
      for (let i = Math.floor(random() * 5); i > 0; i--) Object.defineProperty(out, key(), { value: value(depth), enumerable: true, configurable: true, writable: true });
      return out;
    };
    const mangle = (text: string): string => {
      const at = Math.floor(random() * text.length);
      switch (Math.floor(random() * 5)) {
        case 0: return `${text.slice(0, at)} ${text.slice(at)}`;
        case 1: return text.slice(0, at) + text.slice(at + 1);
        case 2: return text.replace('"a":', '"a":1,"a":');
        case 3: return text.replace(/(\d)([,}\]])/, '$1.0$2');
        default: return text.replace('"b"', '"\\u0062"');
      }
    };
    let spliced = 0;
    for (let i = 0; i < 5_000; i++) {
      const message = object(0);
      if (random() < 0.8) {
        const type = pick(['track', 'identify', 'group', 'screen', 'page', 'alias']);
        Object.assign(message, { userId: pick(['u', null]), event: 'E', groupId: 'g', name: 'n', properties: object(1), traits: object(1), context: object(1), type });
      }
      const text = JSON.stringify(message);
      if (check(text)) spliced++;
      check(mangle(text));
    }
    // The generator must reach the spliced way often, or this test proves little.
    assert.ok(spliced > 1_000, `only ${spliced} of 5000 generated messages were spliced`);
  });
});
