import assert from 'node:assert/strict';
import { it } from 'node:test';
import { draftPlan } from '../../src/domain/plan-draft.js';
import { parseTrackingPlan } from '../../src/domain/tracking-plan.js';

it('drafts an event named __proto__ as an event like any other, not as the prototype of the events object', () => {
  const paths = [{ path: 'plan', types: ['string' as const], count: 2 }];
  const draft = draftPlan(
    {
      events: [
        { type: 'track', event: '__proto__', count: 2, in: 'properties', paths, pathsTruncated: false },
        { type: 'track', event: 'Signed Up', count: 2, in: 'properties', paths, pathsTruncated: false },
      ],
      truncated: { events: false, unrecordedMessages: 0 },
    },
    'draft',
  );
  const events = draft['events'] as Record<string, unknown>;
  assert.deepEqual(Object.keys(events), ['__proto__', 'Signed Up']);
  assert.equal(Object.getPrototypeOf(events), Object.prototype);
  // It survives the trip through JSON and is a valid plan.
  const sent = JSON.parse(JSON.stringify(draft)) as Record<string, unknown>;
  assert.ok(Object.hasOwn(sent['events'] as object, '__proto__'));
  assert.doesNotThrow(() => parseTrackingPlan(sent));
});
