import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CallContext, parseInstant, prepareCall } from '../../src/domain/normalize.js';
import { isRoutedTo } from '../../src/domain/routing.js';

const RECEIVED = Date.parse('2026-01-01T12:00:00.000Z');
let ids = 0;
const ctx = (overrides: Partial<CallContext> = {}): CallContext => ({
  receivedAt: RECEIVED,
  receivedAtIso: new Date(RECEIVED).toISOString(),
  ip: '203.0.113.9',
  pathType: 'track',
  newMessageId: () => `generated-${++ids}`,
  ...overrides,
});

function accepted(raw: unknown, context: CallContext = ctx()) {
  const result = prepareCall(raw, context);
  assert.equal(result.ok, true, result.ok ? '' : result.reason);
  return result.ok ? result.message : {};
}

function rejection(raw: unknown, context: CallContext = ctx()): string {
  const result = prepareCall(raw, context);
  assert.equal(result.ok, false, 'expected a rejection');
  return result.ok ? '' : result.reason;
}

describe('prepareCall: time stamps', () => {
  it('corrects the timestamp for the client clock skew when sentAt is known', () => {
    // The client clock is 1 hour behind: it stamped the event 10 s before sending.
    const message = accepted({ userId: 'u', event: 'E', timestamp: '2026-01-01T10:59:50.000Z', sentAt: '2026-01-01T11:00:00.000Z' });
    assert.equal(message['receivedAt'], '2026-01-01T12:00:00.000Z');
    assert.equal(message['originalTimestamp'], '2026-01-01T10:59:50.000Z');
    assert.equal(message['sentAt'], '2026-01-01T11:00:00.000Z');
    assert.equal(message['timestamp'], '2026-01-01T11:59:50.000Z');
  });

  it("uses the client's timestamp without sentAt, and receivedAt without either", () => {
    assert.equal(accepted({ userId: 'u', event: 'E', timestamp: '2025-06-01T00:00:00Z' })['timestamp'], '2025-06-01T00:00:00.000Z');
    const bare = accepted({ userId: 'u', event: 'E' });
    assert.equal(bare['timestamp'], '2026-01-01T12:00:00.000Z');
    assert.equal(bare['originalTimestamp'], undefined);
  });

  it("applies a batch's sentAt to its elements", () => {
    const message = accepted(
      { type: 'track', userId: 'u', event: 'E', timestamp: '2026-01-01T11:00:00.000Z' },
      ctx({ pathType: undefined, batch: { sentAt: parseInstant('2026-01-01T11:00:10.000Z'), context: undefined, integrations: undefined } }),
    );
    assert.equal(message['sentAt'], '2026-01-01T11:00:10.000Z');
    assert.equal(message['timestamp'], '2026-01-01T11:59:50.000Z');
  });

  it('ignores timestamps that are not dates', () => {
    for (const timestamp of ['yesterday', 12345, {}, '']) {
      const message = accepted({ userId: 'u', event: 'E', timestamp, sentAt: [] });
      assert.equal(message['timestamp'], '2026-01-01T12:00:00.000Z');
      assert.equal(message['sentAt'], undefined);
    }
  });
});

describe('prepareCall: ids, ip, context', () => {
  it('keeps a messageId, generates a missing one, and stringifies numeric ids', () => {
    assert.equal(accepted({ userId: 'u', event: 'E', messageId: 'm-1' })['messageId'], 'm-1');
    assert.match(String(accepted({ userId: 'u', event: 'E' })['messageId']), /^generated-/);
    const numeric = accepted({ userId: 42, event: 'E', messageId: 7 });
    assert.equal(numeric['userId'], '42');
    assert.equal(numeric['messageId'], '7');
  });

  it('removes the write key from the stored message', () => {
    assert.equal(accepted({ userId: 'u', event: 'E', writeKey: 'secret' })['writeKey'], undefined);
  });

  it('sets context.ip for direct calls and browser libraries, never over the client one', () => {
    assert.equal((accepted({ userId: 'u', event: 'E', context: { direct: true } })['context'] as any).ip, '203.0.113.9');
    assert.equal((accepted({ userId: 'u', event: 'E', context: { library: { name: 'analytics.js' } } })['context'] as any).ip, '203.0.113.9');
    assert.equal((accepted({ userId: 'u', event: 'E', context: { direct: true, ip: '198.51.100.1' } })['context'] as any).ip, '198.51.100.1');
    assert.equal((accepted({ userId: 'u', event: 'E', context: { library: { name: 'analytics-node' } } })['context'] as any).ip, undefined);
    assert.equal(accepted({ userId: 'u', event: 'E' })['context'], undefined);
  });

  it("merges a batch's context and integrations under the element's own", () => {
    const message = accepted(
      { type: 'identify', userId: 'u', context: { locale: 'fr', app: { name: 'A' } }, integrations: { Webhooks: true } },
      ctx({ pathType: undefined, batch: { sentAt: undefined, context: { locale: 'en', os: { name: 'ios' } }, integrations: { All: false } } }),
    );
    assert.deepEqual(message['context'], { locale: 'fr', os: { name: 'ios' }, app: { name: 'A' } });
    assert.deepEqual(message['integrations'], { All: false, Webhooks: true });
  });

  it('drops __proto__ keys at any depth and never touches prototypes', () => {
    const raw = JSON.parse('{"userId":"u","event":"E","__proto__":{"polluted":1},"properties":{"a":{"__proto__":{"polluted":2}},"constructor":{"prototype":{"polluted":3}}}}') as unknown;
    const message = accepted(raw);
    assert.equal(Object.prototype.hasOwnProperty.call(message, '__proto__'), false);
    assert.equal(Object.prototype.hasOwnProperty.call((message['properties'] as any).a, '__proto__'), false);
    assert.equal(({} as any).polluted, undefined);
    assert.deepEqual(JSON.parse(JSON.stringify(message['properties'])), { a: {}, constructor: { prototype: { polluted: 3 } } });
  });
});

describe('prepareCall: rules', () => {
  it('rejects what each call type needs and lacks, with a reason a person understands', () => {
    assert.equal(rejection({ event: 'E' }), 'neither userId nor anonymousId');
    assert.equal(rejection({ userId: '', anonymousId: null, event: 'E' }), 'neither userId nor anonymousId');
    assert.equal(rejection({ userId: 'u' }), 'track call without event');
    assert.equal(rejection({ userId: 'u', event: 5 }), 'track event must be a string (got a number)');
    assert.equal(rejection({ userId: 'u' }, ctx({ pathType: 'group' })), 'group call without groupId');
    assert.equal(rejection({ userId: 'u' }, ctx({ pathType: 'alias' })), 'alias call without previousId');
    assert.equal(rejection({ userId: {}, event: 'E' }), 'userId must be a string (got an object)');
    assert.equal(rejection({ userId: 'u', event: 'E', properties: 'x' }), 'properties must be an object (got "x")');
    assert.equal(rejection({ userId: 'u', traits: [] }, ctx({ pathType: 'identify' })), 'traits must be an object (got an array)');
    assert.equal(rejection({ userId: 'u', event: 'E', context: 1 }), 'context must be an object');
    assert.equal(rejection({ userId: 'u', event: 'E', messageId: true }), 'messageId must be a string (got a boolean)');
    assert.equal(rejection({ type: 'nope', userId: 'u' }, ctx({ pathType: undefined })), 'batch element without a valid type (got "nope")');
    assert.equal(rejection(42, ctx({ pathType: undefined })), 'batch element is not a JSON object');
  });

  it('accepts every call type in its minimal valid form', () => {
    accepted({ userId: 'u' }, ctx({ pathType: 'identify' }));
    accepted({ anonymousId: 'a', event: 'E' }, ctx({ pathType: 'track' }));
    accepted({ userId: 'u' }, ctx({ pathType: 'page' }));
    accepted({ userId: 'u', name: 'Home' }, ctx({ pathType: 'screen' }));
    accepted({ userId: 'u', groupId: 'g' }, ctx({ pathType: 'group' }));
    accepted({ userId: 'u', previousId: 'p' }, ctx({ pathType: 'alias' }));
  });

  it('rejects values nested deeper than the limit, keeping a small summary', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100; i++) deep = { d: deep };
    const result = prepareCall({ userId: 'u', event: 'E', messageId: 'm', properties: deep }, ctx());
    assert.equal(result.ok, false);
    assert.match(result.ok ? '' : result.reason, /deeper than 64 levels/);
    assert.deepEqual(result.message, { type: 'track', messageId: 'm' });
  });

  it('is forced to the type of the path', () => {
    assert.equal(accepted({ type: 'identify', userId: 'u', event: 'E' })['type'], 'track');
  });
});

describe('isRoutedTo', () => {
  it('follows the integrations object, case sensitive', () => {
    assert.equal(isRoutedTo(undefined, 'webhooks'), true);
    assert.equal(isRoutedTo({}, 'webhooks'), true);
    assert.equal(isRoutedTo({ Webhooks: false }, 'webhooks'), false);
    assert.equal(isRoutedTo({ webhooks: false }, 'webhooks'), true);
    assert.equal(isRoutedTo({ All: false }, 'webhooks'), false);
    assert.equal(isRoutedTo({ All: false, Webhooks: true }, 'webhooks'), true);
    assert.equal(isRoutedTo({ All: false, Webhooks: { url: 'x' } }, 'webhooks'), true);
    assert.equal(isRoutedTo({ All: true, Webhooks: false }, 'webhooks'), false);
  });
});
