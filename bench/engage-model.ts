/**
 * Cost of the pure Engage model, without a store or a server:
 * `npm run build --silent && node dist/bench/engage-model.js`.
 *
 * With 10 computed traits and 20 audiences (a realistic mix of windows,
 * filters and references), prints one JSON object:
 * - µs per apply + evaluate (what the runtime does per message and profile),
 *   alone and with the state's JSON parse + prune + stringify around it
 *   (CPU time, the best of 10 passes);
 * - bytes of JSON state per profile after N events spread over 90 days, and
 *   with many (every bucket of every window filled), and in an adversarial
 *   case (as many distinct values as the bounds allow, in every bucket).
 * Not part of `npm run bench`, whose figures are end-to-end ratios.
 */
import { pathToFileURL } from 'node:url';
import { type ComputationSpec, type EngageMessage, EngageModel, type ProfileState, emptyProfileState } from '../src/domain/engage/index.js';

const DAY = 86_400_000;

export const ENGAGE_BENCH_SPECS: readonly ComputationSpec[] = [
  t(1, 'orders_30d', { type: 'event_counter', event: 'Order Completed', within: '30d' }),
  t(2, 'orders_all', { type: 'event_counter', event: 'Order Completed' }),
  t(3, 'revenue_90d', { type: 'aggregation', fn: 'sum', event: 'Order Completed', property: 'revenue', within: '90d' }),
  t(4, 'average_order', { type: 'aggregation', fn: 'avg', event: 'Order Completed', property: 'revenue' }),
  t(5, 'largest_order_30d', { type: 'aggregation', fn: 'max', event: 'Order Completed', property: 'revenue', within: '30d' }),
  t(6, 'favourite_category', { type: 'most_frequent', event: 'Product Viewed', property: 'category', within: '30d' }),
  t(7, 'first_source', { type: 'first', event: { type: 'page' }, property: 'utm_source' }),
  t(8, 'last_sku', { type: 'last', event: 'Product Viewed', property: 'sku' }),
  t(9, 'skus_viewed_7d', { type: 'unique_list', event: 'Product Viewed', property: 'sku', within: '7d' }),
  t(10, 'categories_30d', { type: 'unique_list_count', event: 'Product Viewed', property: 'category', within: '30d' }),
  a(1, 'buyers', { performed: { event: 'Order Completed' } }),
  a(2, 'repeat_buyers_30d', { performed: { event: 'Order Completed', within: '30d', count: { op: '>=', value: 2 } } }),
  a(3, 'big_spenders', { computedTrait: { key: 'revenue_90d', op: '>=', value: 500 } }),
  a(4, 'pro_users', { trait: { key: 'plan', op: '=', value: 'pro' } }),
  a(5, 'lapsed_buyers', { and: [{ inAudience: 'buyers' }, { notPerformed: { event: 'Order Completed', within: '30d' } }] }),
  a(6, 'active_1d', { performed: { event: { type: 'page' }, within: '1d' } }),
  a(7, 'active_7d', { performed: { event: { type: 'page' }, within: '7d', count: { op: '>=', value: 3 } } }),
  a(8, 'window_shoppers', { and: [{ performed: { event: 'Product Viewed', within: '7d', count: { op: '>=', value: 5 } } }, { notPerformed: { event: 'Order Completed', within: '7d' } }] }),
  a(9, 'pro_buyers', { and: [{ inAudience: 'pro_users' }, { inAudience: 'buyers' }] }),
  a(10, 'shoes_fans', { computedTrait: { key: 'favourite_category', op: '=', value: 'shoes' } }),
  a(11, 'many_categories', { computedTrait: { key: 'categories_30d', op: '>=', value: 3 } }),
  a(12, 'eu_users', { or: [{ trait: { key: 'address.country', op: '=', value: 'FR' } }, { trait: { key: 'address.country', op: '=', value: 'DE' } }] }),
  a(13, 'big_orders_7d', { performed: { event: 'Order Completed', within: '7d', where: [{ property: 'revenue', op: '>=', value: 200 }] } }),
  a(14, 'not_pro', { not: { inAudience: 'pro_users' } }),
  a(15, 'signed_up_recently', { performed: { event: 'Signed Up', within: '14d' } }),
  a(16, 'new_without_order', { and: [{ inAudience: 'signed_up_recently' }, { notInAudience: 'buyers' }] }),
  a(17, 'hourly_viewers', { performed: { event: 'Product Viewed', within: '1h', count: { op: '>=', value: 3 } } }),
  a(18, 'adults', { trait: { key: 'age', op: '>=', value: 18 } }),
  a(19, 'engaged_pro', { and: [{ inAudience: 'pro_users' }, { or: [{ inAudience: 'active_7d' }, { inAudience: 'repeat_buyers_30d' }] }] }),
  a(20, 'google_visitors', { computedTrait: { key: 'first_source', op: '=', value: 'google' } }),
];

function t(n: number, key: string, definition: unknown): ComputationSpec {
  return { id: `ct_${n}`, kind: 'trait', key, definition };
}
function a(n: number, key: string, definition: unknown): ComputationSpec {
  return { id: `aud_${n}`, kind: 'audience', key, definition };
}

/** mulberry32 */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const CATEGORIES = ['shoes', 'hats', 'bags', 'shirts', 'socks', 'belts'];
const SOURCES = ['google', 'newsletter', 'twitter', 'direct'];

/** `distinct` widens the values of categories and skus (1 = the realistic mix). */
function messageAt(next: () => number, timestamp: number, distinct = 1): EngageMessage {
  const roll = next();
  if (roll < 0.05) return { type: 'identify', traits: { plan: next() < 0.3 ? 'pro' : 'free', age: 16 + Math.floor(next() * 50), address: { country: next() < 0.5 ? 'FR' : 'US' } }, timestamp };
  if (roll < 0.35) return { type: 'page', properties: { path: '/p', utm_source: SOURCES[Math.floor(next() * SOURCES.length)] }, timestamp };
  if (roll < 0.85) {
    const category = distinct === 1 ? CATEGORIES[Math.floor(next() * CATEGORIES.length)] : `category-${Math.floor(next() * 10 * distinct)}`;
    return { type: 'track', event: 'Product Viewed', properties: { sku: `sku-${Math.floor(next() * 200 * distinct)}`, category }, timestamp };
  }
  if (roll < 0.97) return { type: 'track', event: 'Order Completed', properties: { revenue: Math.round(next() * 300), currency: 'EUR' }, timestamp };
  return { type: 'track', event: 'Signed Up', properties: {}, timestamp };
}

/** A profile's state after `events` messages spread evenly over `spanMs` ending at `end`, pruned at `end`. */
function profileWith(model: EngageModel, next: () => number, events: number, spanMs: number, end: number, distinct = 1): ProfileState {
  let state = emptyProfileState();
  for (let i = 0; i < events; i++) state = model.apply(state, messageAt(next, end - spanMs + Math.floor(((i + next()) * spanMs) / events), distinct));
  return model.prune(state, end);
}

function main(): void {
  const model = EngageModel.compile(ENGAGE_BENCH_SPECS);
  const next = random(42);
  const now = Date.UTC(2026, 5, 1);

  // Per-message cost on profiles with a realistic history (200 events over 90 days).
  const profiles = Array.from({ length: 1_000 }, () => profileWith(model, next, 200, 90 * DAY, now));
  const stored = profiles.map((p) => JSON.stringify(p));
  const messages = Array.from({ length: 50_000 }, (_, i) => messageAt(next, now + i * 10));
  // CPU time of this process (not wall time, which a shared machine's other processes inflate), the best of 10 passes.
  const rounds = (fn: (i: number) => void): number => {
    for (let i = 0; i < 5_000; i++) fn(i); // warm-up
    const pass = messages.length / 10;
    let best = Infinity;
    for (let p = 0; p < 10; p++) {
      const start = process.cpuUsage();
      for (let i = p * pass; i < (p + 1) * pass; i++) fn(i);
      const used = process.cpuUsage(start);
      best = Math.min(best, (used.user + used.system) / pass);
    }
    return best;
  };
  let sink = 0;
  const applyEvaluate = rounds((i) => {
    const state = profiles[i % profiles.length]!;
    const message = messages[i]!;
    model.apply(state, message);
    sink += Object.keys(model.evaluate(state, message.timestamp)).length;
  });
  const withJson = rounds((i) => {
    const k = i % stored.length;
    const message = messages[i]!;
    const state = model.apply(JSON.parse(stored[k]!) as ProfileState, message);
    const before = model.evaluate(state, message.timestamp);
    sink += Object.keys(before).length;
    stored[k] = JSON.stringify(model.prune(state, message.timestamp));
  });
  const expiry = rounds((i) => {
    sink += model.nextExpiry(profiles[i % profiles.length]!, now + i) ?? 0;
  });

  const bytes = (events: number): number => {
    const sizes = Array.from({ length: 200 }, () => JSON.stringify(profileWith(model, next, events, 90 * DAY, now)).length);
    return Math.round(sizes.reduce((x, y) => x + y, 0) / sizes.length);
  };
  // Worst case: an event in every bucket of every window (one message per smallest bucket over the longest window).
  const many = JSON.stringify(profileWith(model, next, 6_000, 90 * DAY, now)).length;
  // 60,000 events, 60 categories (most_frequent keeps 50 candidates, each in up to 66 buckets), 2,000 skus.
  const adversarial = JSON.stringify(profileWith(model, next, 60_000, 90 * DAY, now, 6)).length;

  const result = {
    definitions: { traits: 10, audiences: 20 },
    usPerApplyEvaluate: round(applyEvaluate),
    usPerApplyEvaluateWithJsonPrune: round(withJson),
    usPerNextExpiry: round(expiry),
    stateBytes: { events10: bytes(10), events100: bytes(100), events1000: bytes(1_000), events6000: many, adversarial },
    node: process.version,
  };
  if (sink === -1) console.error(sink);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

// Run when executed, not when imported (the specs are shared).
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main();
