import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ComputationSpec, EngageModel, STATE_LIMITS, emptyProfileState } from '../../src/domain/engage/index.js';

const T0 = Date.UTC(2026, 0, 1);
const trait = (id: string, definition: unknown): ComputationSpec => ({ id, kind: 'trait', key: id, definition });

/**
 * Issue 29: a heavy user (200,000 tracks, a new property value in each) must
 * not make the state a message rewrites grow with the profile's history.
 */
describe('Engage state of a heavy user', () => {
  it('stays within the bounds however many distinct values it has seen', () => {
    const model = EngageModel.compile([
      trait('skus', { type: 'unique_list', event: 'Viewed', property: 'sku', within: '30d' }),
      trait('sku_count', { type: 'unique_list_count', event: 'Viewed', property: 'sku' }),
      trait('top_sku_30d', { type: 'most_frequent', event: 'Viewed', property: 'sku', within: '30d' }),
      trait('top_sku', { type: 'most_frequent', event: 'Viewed', property: 'sku' }),
      trait('last_sku', { type: 'last', event: 'Viewed', property: 'sku' }),
    ]);
    const state = emptyProfileState();
    const pad = 'x'.repeat(STATE_LIMITS.valueLength - 20);
    const sizes = new Map<number, number>();
    const total = 12_000;
    for (let i = 1; i <= total; i++) {
      // One value per message, one message a minute: every bucket of the windows fills.
      const at = T0 + i * 60_000;
      model.apply(state, { type: 'track', event: 'Viewed', properties: { sku: `${i}-${pad}` }, timestamp: at });
      if (i % 2_000 === 0) {
        model.prune(state, at);
        sizes.set(i, JSON.stringify(state).length);
      }
    }
    const saturated = sizes.get(4_000)!;
    const last = sizes.get(total)!;
    // The caps are reached early; ten times the history afterwards adds nothing but bucket churn.
    assert.ok(last <= saturated * 1.05, `${last} bytes after ${total} values, ${saturated} after 4,000`);
    const entry = STATE_LIMITS.valueLength + 40;
    const bound =
      2 * STATE_LIMITS.uniqueValues * entry + // the two unique lists
      STATE_LIMITS.frequentCandidates * (entry + 66 * 24) + // windowed most_frequent: a count per bucket
      STATE_LIMITS.frequentCandidates * entry + // all-time most_frequent
      2 * entry; // last
    assert.ok(last <= bound, `${last} bytes > ${bound}`);
  });
});
