import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonObject } from '../../src/domain/message.js';
import { keepsUnicode, runsLinear, unsafePattern } from '../../src/domain/safe-pattern.js';
import { compileTrackingPlan, parseTrackingPlan, PLAN_BOUNDS, type TrackingPlanDefinition, TrackingPlanError } from '../../src/domain/tracking-plan.js';
import { KEYS, schemaCost, UNIQUE_ITEMS_MAX_ITEMS, UNITS, VALUES } from '../../src/domain/plan-cost.js';
import { draftPlan } from '../../src/domain/plan-draft.js';
import type { JsonTypeName, ObservedSchemaView } from '../../src/domain/observed-schema.js';
import { checkAgainstPlan } from '../../src/domain/tracking-plan-check.js';
import { enableLinearRegExpFallback } from '../../src/util/regexp-fallback.js';

enableLinearRegExpFallback();

const ORDER = { type: 'object', properties: { revenue: { type: 'number' }, currency: { type: 'string', pattern: '^[A-Z]{3}$' } }, required: ['revenue'] };

function compiled(plan: unknown) {
  return compileTrackingPlan('tp_1', 3, parseTrackingPlan(plan));
}

function refusal(plan: unknown): string {
  try {
    parseTrackingPlan(plan);
  } catch (error) {
    assert.ok(error instanceof TrackingPlanError);
    return error.message;
  }
  assert.fail('the plan was accepted');
}

describe('tracking plan: saving', () => {
  it('refuses a schema that is not JSON Schema, naming the event and the keyword', () => {
    const message = refusal({ events: { 'Order Completed': { properties: { type: 'object', properties: { revenue: { type: 'money' } } } } } });
    assert.match(message, /Order Completed/);
    assert.match(message, /keyword "type"/);
  });

  it('refuses a control value not listed, naming it', () => {
    assert.match(refusal({ events: {}, controls: { violations: 'drop' } }), /controls\.violations.*keyword "violations"/);
    assert.match(refusal({ events: {}, controls: { unplannedProperties: 'block' } }), /unplannedProperties/);
  });

  it('refuses a plan over 256 KB', () => {
    const big = { events: { E: { properties: { type: 'object', description: 'x'.repeat(PLAN_BOUNDS.bytes) } } } };
    assert.match(refusal(big), /256 KB/);
  });

  it('refuses a catastrophically backtracking pattern and accepts a safe one', () => {
    assert.match(refusal({ events: { Signup: { properties: { properties: { email: { type: 'string', pattern: '^(a+)+$' } } } } } }), /Signup.*keyword "pattern"/);
    assert.match(refusal({ identify: { traits: { patternProperties: { '^(\\w*)*x$': {} } } } }), /identify traits/);
    assert.doesNotThrow(() => parseTrackingPlan({ events: { Signup: { properties: { properties: { email: { type: 'string', pattern: '^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$' } } } } } }));
    assert.equal(unsafePattern('^(ab|cd)*$'), undefined);
    assert.notEqual(unsafePattern('(x+y?){2,}'), undefined);
  });

  it('compiles draft-07 and 2020-12 schemas', () => {
    const plan2020 = compiled({
      events: { Viewed: { properties: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { tags: { type: 'array', prefixItems: [{ type: 'string' }] } } } } },
      controls: { violations: 'flag' },
    });
    const bad: JsonObject = { type: 'track', event: 'Viewed', properties: { tags: [1] } };
    assert.equal(checkAgainstPlan(plan2020, bad, 'track').action, 'flag');
    const plan07 = compiled({ events: { 'Order Completed': { properties: { $schema: 'http://json-schema.org/draft-07/schema#', ...ORDER } } } });
    assert.equal(checkAgainstPlan(plan07, { event: 'Order Completed', properties: { revenue: 1 } }, 'track').action, 'pass');
  });
});

describe('tracking plan: checking a message', () => {
  it('flags violations in RudderStack shape', () => {
    const plan = compiled({ events: { 'Order Completed': { properties: { ...ORDER, additionalProperties: false } } }, controls: { violations: 'flag' } });
    const message: JsonObject = { type: 'track', event: 'Order Completed', properties: { currency: 'euro', extra: 1 }, context: {} };
    const verdict = checkAgainstPlan(plan, message, 'track');
    assert.equal(verdict.action, 'flag');
    const context = message['context'] as JsonObject;
    assert.equal(context['trackingPlanId'], 'tp_1');
    assert.equal(context['trackingPlanVersion'], 3);
    const types = (context['violationErrors'] as { type: string; property?: string; meta: { instancePath: string } }[]).map((v) => `${v.type}:${v.property}:${v.meta.instancePath}`).sort();
    assert.deepEqual(types, ['Additional-Properties:extra:/properties', 'Advance-Rules-Violation:currency:/properties/currency', 'Required-Missing:revenue:/properties']);
  });

  it('omit drops the violating and unplanned properties and keeps the rest', () => {
    const plan = compiled({ events: { 'Order Completed': { properties: ORDER } }, controls: { violations: 'omit', unplannedProperties: 'omit' } });
    const message: JsonObject = { type: 'track', event: 'Order Completed', properties: { revenue: 'ten', currency: 'EUR', secret: 'x' } };
    assert.equal(checkAgainstPlan(plan, message, 'track').action, 'flag');
    assert.deepEqual(message['properties'], { currency: 'EUR' });
  });

  it('blocks, allows and flags unplanned events by their control', () => {
    for (const [control, action] of [['block', 'block'], ['flag', 'flag'], ['allow', 'pass']] as const) {
      const plan = compiled({ events: { A: {} }, controls: { unplannedEvents: control } });
      const message: JsonObject = { type: 'track', event: 'B', properties: {} };
      const verdict = checkAgainstPlan(plan, message, 'track');
      assert.equal(verdict.action, action);
      assert.equal(verdict.violations[0]?.type ?? 'none', control === 'allow' ? 'none' : 'Unplanned-Event');
    }
  });

  it('checks identify and group traits and the common schema; allow leaves the message untouched', () => {
    const plan = compiled({ identify: { traits: { type: 'object', properties: { email: { type: 'string', format: 'email' } } } }, group: { traits: { required: ['name'] } }, common: { required: ['userId'] }, controls: { violations: 'block' } });
    assert.equal(checkAgainstPlan(plan, { userId: 'u', traits: { email: 'nope' } }, 'identify').violations[0]?.type, 'Advance-Rules-Violation');
    assert.equal(checkAgainstPlan(plan, { userId: 'u', traits: {} }, 'group').violations[0]?.type, 'Required-Missing');
    assert.equal(checkAgainstPlan(plan, { anonymousId: 'a', name: 'Home' }, 'page').action, 'block');
    const allow = compiled({ common: { required: ['userId'] }, controls: { violations: 'allow' } });
    const message: JsonObject = { anonymousId: 'a' };
    assert.equal(checkAgainstPlan(allow, message, 'page').action, 'pass');
    assert.deepEqual(message, { anonymousId: 'a' });
  });

  it('reports at most 20 violations per message', () => {
    const properties = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`p${i}`, { type: 'number' }]));
    const plan = compiled({ events: { E: { properties: { properties } } } });
    const bad = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`p${i}`, 'x']));
    const message: JsonObject = { event: 'E', properties: bad };
    assert.equal(checkAgainstPlan(plan, message, 'track').violations.length, 20);
    assert.equal(((message['context'] as JsonObject)['violationErrors'] as unknown[]).length, 20);
  });
});

describe('plan patterns: without the u flag where they do not need it (so V8 can fall back to its linear engine), with it where they do', () => {
  const check = (pattern: string, value: string): string => {
    const plan = compileTrackingPlan('tp_u', 1, parseTrackingPlan({ events: { E: { properties: { type: 'object', properties: { v: { type: 'string', pattern } } } } }, controls: { violations: 'flag' } }));
    return checkAgainstPlan(plan, { event: 'E', properties: { v: value } }, 'track').action;
  };

  it('runs a plain pattern as before', () => {
    assert.equal(check('^[a-z]+-\\d{2}$', 'abc-12'), 'pass');
    assert.equal(check('^[a-z]+-\\d{2}$', 'abc-1'), 'flag');
  });

  it('keeps u for Unicode property and code point escapes and characters outside the BMP', () => {
    assert.equal(check('^\\p{Lu}\\p{Ll}+$', 'Élan'), 'pass');
    assert.equal(check('^\\p{Lu}\\p{Ll}+$', 'élan'), 'flag');
    assert.equal(check('^\\u{1F600}$', '\u{1F600}'), 'pass');
    assert.equal(check('^😀+$', '😀😀'), 'pass');
  });

  it('counts a character outside the BMP as two in a pattern without u', () => {
    assert.equal(check('^.{2}$', '😀'), 'pass');
    assert.equal(check('^.$', '😀'), 'flag');
  });
});

describe('plans that cost too much or cannot check every message', () => {
  it('refuses more than PLAN_BOUNDS.patterns patterns in all, counting patternProperties keys', () => {
    // Five patternProperties keys (each tried on every key: more would cost too much, below) and n - 5 patterns.
    const keys = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`^k${i}_[a-z]+$`, { type: 'string' }]));
    const properties = (n: number) => Object.fromEntries(Array.from({ length: n - 5 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^x${i}$` }]));
    const plan = (n: number) => ({ events: { E: { properties: { type: 'object', patternProperties: keys, properties: properties(n) } } } });
    assert.doesNotThrow(() => parseTrackingPlan(plan(PLAN_BOUNDS.patterns)));
    assert.throws(() => parseTrackingPlan(plan(PLAN_BOUNDS.patterns + 1)), (error: unknown) => error instanceof TrackingPlanError && /501 patterns/.test(error.message));
  });

  it('a schema that throws on a value (a $ref cycle) makes that message a violation, not an error', () => {
    // Refused at save now ($ref cycles), but a plan stored before that is not checked again.
    const stored: TrackingPlanDefinition = {
      events: { R: { properties: { definitions: { a: { anyOf: [{ $ref: '#/definitions/a' }] } }, allOf: [{ $ref: '#/definitions/a' }] } } },
      controls: { unplannedEvents: 'allow', violations: 'block', unplannedProperties: 'allow' },
    };
    assert.match(refusal(stored), /event "R".*\$ref cycle.*keyword "\$ref"/);
    const plan = compileTrackingPlan('tp_r', 1, stored);
    const verdict = checkAgainstPlan(plan, { event: 'R', properties: {} }, 'track');
    assert.equal(verdict.action, 'block');
    assert.equal(verdict.violations[0]!.type, 'Unknown-Violation');
    assert.match(verdict.violations[0]!.message, /could not check this message/);
    // Other events of the same plan are checked as usual.
    assert.equal(checkAgainstPlan(plan, { event: 'Other', properties: {} }, 'track').action, 'pass');
  });
});

describe('patterns V8\'s linear-time engine cannot take over must be plainly linear', () => {
  it('refuses lookarounds and backreferences', () => {
    for (const pattern of ['^(?=1)\\d+$', '^\\d+(?!x)$', '(?<=a)b', '(?<!a)b', '(a)\\1', '(?<n>a)\\k<n>']) {
      assert.match(unsafePattern(pattern) ?? 'accepted', /lookaround or a backreference/, pattern);
    }
  });

  it('knows which patterns the linear engine runs: no u needed, no count above 16', () => {
    assert.equal(runsLinear('^(\\w|\\d)+$'), true);
    assert.equal(runsLinear('^[A-Z]{3}-\\d{2,}$'), true);
    assert.equal(runsLinear('^.{1,16}$'), true);
    for (const pattern of ['^.{1,255}$', '^a{17}$', '^a{17,}$', '^a{0,100}$', '^\\p{L}+$', '^\\u{61}+$', '^\\uD83D\\uDE00$', '^😀$']) assert.equal(runsLinear(pattern), false, pattern);
  });

  it('with the u flag or a large count: no quantified group, and one unbounded repetition at most', () => {
    // The review's bypasses of the fallback: each ran past 20 s on 35 characters.
    for (const pattern of ['^(\\w|\\d){1,100}$', '^(\\w|\\d)+a{0,17}$', '^(\\w|\\d)+$|\\u{61}', '^(\\w|\\d)+$|\\p{L}', '^\\d*\\d*x.{0,20}$']) {
      assert.notEqual(unsafePattern(pattern), undefined, pattern);
    }
    // Common plan patterns stay accepted.
    for (const pattern of ['^.{1,255}$', '^\\p{Lu}\\p{Ll}+$', '^[A-Z]{3}$', '^\\d{4}-\\d{2}-\\d{2}$', '^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$', '^(en|fr|de)(-[A-Z]{2})?$', '^[\\uD83D\\uDE00-\\uD83D\\uDE4F]+$']) {
      assert.equal(unsafePattern(pattern), undefined, pattern);
    }
  });

  it('keeps u for surrogates written as escapes: a stored plan with an emoji range still compiles and means the same', () => {
    assert.equal(keepsUnicode('^[\\uD83D\\uDE00-\\uD83D\\uDE4F]+$'), true);
    const plan = compileTrackingPlan('tp_e', 1, parseTrackingPlan({ events: { E: { properties: { type: 'object', properties: { v: { type: 'string', pattern: '^[\\uD83D\\uDE00-\\uD83D\\uDE4F]+$' } } } } }, controls: { violations: 'flag' } }));
    assert.equal(checkAgainstPlan(plan, { event: 'E', properties: { v: '😀🙏' } }, 'track').action, 'pass');
    assert.equal(checkAgainstPlan(plan, { event: 'E', properties: { v: 'a' } }, 'track').action, 'flag');
  });

  it('every accepted pattern answers at once on a value made to make it backtrack', () => {
    const value = `${'1'.repeat(40)}!`;
    for (const pattern of ['^(\\w|\\d)+$', '^(a|a)*$', '^\\d*\\d*\\d*\\d*\\d*\\d*x$', '^(\\d|\\w)+(\\d|1)+$']) {
      if (unsafePattern(pattern) !== undefined) continue; // refused at save: never runs
      const plan = compileTrackingPlan('tp_b', 1, parseTrackingPlan({ events: { E: { properties: { type: 'object', properties: { v: { type: 'string', pattern } } } } } }));
      // Without the fallback (set by startSwitchyard; here by the import below) this would not return for hours.
      assert.equal(checkAgainstPlan(plan, { event: 'E', properties: { v: value } }, 'track').action, 'flag', pattern);
    }
  });
});


describe('what checking a message can cost, bounded when the plan is saved', () => {
  const event = (schema: unknown) => ({ events: { E: { properties: schema } } });
  const units = (schema: unknown): number => {
    const cost = schemaCost(schema);
    assert.ok('units' in cost, JSON.stringify(cost));
    return cost.units;
  };

  it('uniqueItems: only where ajv hashes the items (a typed, not object or array, items) or with a small maxItems', () => {
    assert.match(refusal(event({ properties: { a: { type: 'array', uniqueItems: true } } })), /event "E": uniqueItems .*maxItems.*keyword "uniqueItems"/);
    assert.match(refusal(event({ properties: { a: { uniqueItems: true, items: { type: 'object' } } } })), /keyword "uniqueItems"/);
    assert.match(refusal(event({ properties: { a: { uniqueItems: true, maxItems: UNIQUE_ITEMS_MAX_ITEMS + 1 } } })), /keyword "uniqueItems"/);
    for (const ok of [{ uniqueItems: true, items: { type: 'string' } }, { uniqueItems: true, items: { type: ['integer', 'null'] } }, { uniqueItems: true, maxItems: UNIQUE_ITEMS_MAX_ITEMS }, { uniqueItems: false }]) {
      assert.doesNotThrow(() => parseTrackingPlan(event({ properties: { a: ok } })), JSON.stringify(ok));
    }
  });

  it('a $ref only to a JSON pointer in the same schema, in no cycle, with $id only at the root', () => {
    assert.match(refusal(event({ definitions: { n: { items: { $ref: '#/definitions/n' } } }, $ref: '#/definitions/n' })), /\$ref cycle.*keyword "\$ref"/);
    assert.match(refusal(event({ properties: { a: { $ref: '#' } } })), /keyword "\$ref"/);
    assert.match(refusal(event({ $id: 'https://x.test/s', properties: { a: { $ref: 'https://x.test/s#/definitions/n' } }, definitions: { n: {} } })), /JSON pointer.*keyword "\$ref"/);
    assert.match(refusal(event({ properties: { a: { $id: 'https://x.test/a', type: 'string' } } })), /keyword "\$id"/);
    assert.match(refusal(event({ $schema: 'https://json-schema.org/draft/2020-12/schema', $dynamicAnchor: 'n', properties: { a: { $dynamicRef: '#n' } } })), /keyword "\$dynamicRef"/);
    const shared = { definitions: { money: { type: 'number', minimum: 0 } }, properties: { a: { $ref: '#/definitions/money' }, b: { $ref: '#/definitions/money' } } };
    assert.doesNotThrow(() => parseTrackingPlan(event(shared)));
  });

  it('refuses a $ref that ajv compiles as a call of its own (its target holds a $ref) under items, additionalProperties or patternProperties: its errors add up with the square of the items', () => {
    const definitions = { category: { type: 'string' }, product: { type: 'object', properties: { sku: { type: 'string' }, category: { $ref: '#/definitions/category' } } } };
    for (const [keyword, schema] of [
      ['items', { definitions, properties: { products: { type: 'array', items: { $ref: '#/definitions/product' } } } }],
      ['additionalProperties', { definitions, properties: { byId: { type: 'object', additionalProperties: { $ref: '#/definitions/product' } } } }],
      ['patternProperties', { definitions, properties: { byId: { type: 'object', patternProperties: { '^p': { allOf: [{ $ref: '#/definitions/product' }] } } } } }],
      ['items', { definitions, properties: { nested: { type: 'array', items: { type: 'object', properties: { p: { $ref: '#/definitions/product' } } } } } }],
    ] as const) {
      assert.match(refusal(event(schema)), new RegExp(`a \\$ref to a definition that itself holds a \\$ref, under "${keyword}".*keyword "\\$ref"`), JSON.stringify(schema));
    }
    // Inlined by ajv (the target holds no $ref) under items, or called once (not under items): accepted.
    const inlined = { definitions: { product: { type: 'object', properties: { sku: { type: 'string' } } } }, properties: { products: { type: 'array', items: { $ref: '#/definitions/product' } } } };
    assert.doesNotThrow(() => parseTrackingPlan(event(inlined)));
    assert.doesNotThrow(() => parseTrackingPlan(event({ definitions, properties: { featured: { $ref: '#/definitions/product' } } })));
  });

  it('counts a schema reached twice per level through $ref as many times: a chain of 22 doubles is 2^22 applications, refused', () => {
    const definitions: Record<string, unknown> = { d22: { type: 'number' } };
    for (let i = 0; i < 22; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i + 1}` }, { $ref: `#/definitions/d${i + 1}` }] };
    const schema = { definitions, $ref: '#/definitions/d0' };
    // The root's $ref, d0 … d21 once per path (2^i) with their allOf and two {$ref} (2^(i+1)), d22 2^22 times: all on one value.
    assert.equal(units(schema), 1 + 3 * (2 ** 22 - 1) + 2 ** 22);
    assert.match(refusal(event(schema)), new RegExp(`event "E": checking the largest message could cost \\d+ units, over the ${PLAN_BOUNDS.checkUnits}`));
  });

  it('a schema under items applies to every value of the largest message; allOf of many of them is refused', () => {
    assert.equal(units({ items: { type: 'string' } }), 1 + VALUES);
    const many = (n: number) => ({ allOf: Array.from({ length: n }, () => ({ items: { type: 'string' } })) });
    assert.doesNotThrow(() => parseTrackingPlan(event(many(5))));
    assert.match(refusal(event(many(50))), /costliest keyword is "allOf".*keyword "allOf"/);
  });

  it('patternProperties cost every pattern on every key: a few are fine, hundreds are refused', () => {
    const patterns = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`^k${i}_`, { type: 'string' }]));
    assert.ok(units({ patternProperties: patterns(2) }) >= 2 * KEYS);
    assert.doesNotThrow(() => parseTrackingPlan(event({ type: 'object', patternProperties: patterns(5) })));
    assert.match(refusal(event({ type: 'object', patternProperties: patterns(100) })), /keyword "patternProperties"/);
    assert.match(refusal(event({ type: 'object', patternProperties: patterns(500) })), /keyword "patternProperties"/);
  });

  it('siblings under properties do not add up: a value sits under one name', () => {
    const wide = (n: number) => ({ type: 'array', items: { type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { type: 'string' }])) } });
    // Each item costs its type and properties (one lookup per name); each value below it one type; the root its type and items.
    assert.equal(units(wide(1)), VALUES * (2 + UNITS.lookup) + 2);
    assert.ok(Math.abs(units(wide(100)) - (VALUES * (2 + 100 * UNITS.lookup) + 2)) < 1e-6);
    // Through properties only, each value is one value of the message: the schemas are summed, once.
    assert.equal(units({ properties: { a: { type: 'string' }, b: { type: 'string' } } }), 1 + 2 * UNITS.lookup + 2);
    // Schemas that can apply to one value add up: allOf, and a pattern beside a name of properties.
    const both = units({ properties: { k0_a: { items: { type: 'string' } } }, patternProperties: { '^k0_': { items: { type: 'string' } } } });
    assert.ok(both >= 2 * VALUES, String(both));
  });

  it('counts the event schema and common together', () => {
    const half = { allOf: Array.from({ length: 8 }, () => ({ items: { type: 'string' } })) };
    assert.doesNotThrow(() => parseTrackingPlan(event({ properties: { a: half } })));
    assert.match(refusal({ ...event({ properties: { a: half } }), common: { properties: { b: half } } }), /event "E".*with common's/);
  });

  it('keeps plans of the usual shape: ecommerce events, 200 formatted traits, anyOf branches, tags with uniqueItems', () => {
    const str = { type: 'string' };
    const num = { type: 'number' };
    const product = { type: 'object', properties: Object.fromEntries(['product_id', 'sku', 'category', 'name', 'brand', 'variant', 'price', 'quantity', 'coupon', 'position', 'url', 'image_url'].map((k) => [k, ['price', 'quantity', 'position'].includes(k) ? num : str])), required: ['product_id'] };
    const order = { type: 'object', properties: { order_id: str, affiliation: str, total: num, revenue: num, shipping: num, tax: num, discount: num, coupon: str, currency: { type: 'string', pattern: '^[A-Z]{3}$' }, products: { type: 'array', items: product } }, required: ['order_id'], additionalProperties: false };
    const viewed = { type: 'object', properties: { ...product.properties, currency: str, value: num }, required: ['product_id'] };
    const listed = { type: 'object', properties: { list_id: str, category: str, products: { type: 'array', items: product } } };
    const checkout = { type: 'object', properties: { checkout_id: str, step: { type: 'integer', minimum: 1 }, shipping_method: str, payment_method: { enum: ['card', 'paypal', 'invoice', 'gift card'] } } };
    const tags = { type: 'object', properties: { tags: { type: 'array', uniqueItems: true, items: { type: 'string', maxLength: 50, pattern: '^[a-z-]+$' } } } };
    const traits = { type: 'object', properties: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`trait_${i}`, i % 2 === 0 ? { type: 'string', format: 'email', maxLength: 254 } : { type: 'string', pattern: '^[a-z0-9_]+$', maxLength: 64 }])) };
    const branches = (n: number) => ({ anyOf: [str, num, { type: 'boolean' }, { type: 'null' }, { type: 'object', properties: { id: str, n: num } }].slice(0, n) });
    const anyOfs = { type: 'object', properties: { value: branches(3), extra: branches(5), list: { type: 'array', items: branches(5) }, rows: { type: 'array', items: { type: 'object', properties: { a: branches(4), b: branches(5), c: branches(3) } } } } };
    const nested = { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'array', items: { type: 'object', properties: { c: { type: 'array', items: { type: 'object', properties: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`x${i}`, { type: 'string', enum: ['a', 'b', 'c'] }])) } } } } } } } } };
    const plan = {
      events: { 'Order Completed': { properties: order }, 'Product Viewed': { properties: viewed }, 'Product List Viewed': { properties: listed }, 'Checkout Step Completed': { properties: checkout }, Tagged: { properties: tags }, Mixed: { properties: anyOfs }, Nested: { properties: nested } },
      identify: { traits },
      common: { required: ['userId'] },
    };
    assert.doesNotThrow(() => parseTrackingPlan(plan));
    for (const schema of [order, anyOfs, nested]) assert.ok(units(schema) < PLAN_BOUNDS.checkUnits / 2, `${units(schema)}`);
  });

  it('keeps a plan drafted from a wide observed schema: 200 paths, arrays of objects of 40 fields of several types', () => {
    const paths: { path: string; types: JsonTypeName[]; count: number }[] = [];
    for (let i = 0; i < 100; i++) paths.push({ path: `p${i}`, types: ['string'], count: 10 });
    for (const list of ['items', 'lines']) {
      paths.push({ path: list, types: ['array'], count: 10 }, { path: `${list}[]`, types: ['object'], count: 10 });
      for (let i = 0; i < 40; i++) paths.push({ path: `${list}[].f${i}`, types: ['string', 'null'], count: 10 });
    }
    paths.push({ path: 'tags', types: ['array'], count: 10 }, { path: 'tags[]', types: ['string'], count: 10 }, { path: 'deep', types: ['object'], count: 10 });
    for (let i = 0; i < 15; i++) paths.push({ path: `deep.rows[].cells[].v${i}`, types: ['integer', 'number', 'null'], count: 3 });
    const observed = { events: [{ type: 'track', event: 'Wide', count: 10, paths, pathsTruncated: false }, { type: 'identify', event: null, count: 10, paths, pathsTruncated: false }] } as unknown as ObservedSchemaView;
    const draft = draftPlan(observed, 'draft');
    assert.doesNotThrow(() => parseTrackingPlan(draft));
    const wide = ((draft['events'] as JsonObject)['Wide'] as JsonObject)['properties'];
    assert.ok(units(wide) < PLAN_BOUNDS.checkUnits / 2, `${units(wide)}`);
  });

  it('an array of thousands of wrong items: 20 violations shown, and with omit the property is removed', () => {
    const schema = { type: 'object', properties: { a: { type: 'array', items: { type: 'string' } }, keep: { type: 'string' } } };
    const flagPlan = compiled({ events: { E: { properties: schema } }, controls: { violations: 'flag' } });
    const flagged: JsonObject = { event: 'E', properties: { a: Array(5_000).fill(0), keep: 'x' } };
    assert.equal(checkAgainstPlan(flagPlan, flagged, 'track').violations.length, PLAN_BOUNDS.violationsPerMessage);
    const omitPlan = compiled({ events: { E: { properties: schema } }, controls: { violations: 'omit' } });
    const omitted: JsonObject = { event: 'E', properties: { a: Array(5_000).fill(0), keep: 'x' } };
    assert.equal(checkAgainstPlan(omitPlan, omitted, 'track').action, 'flag');
    assert.deepEqual(omitted['properties'], { keep: 'x' });
  });
});
