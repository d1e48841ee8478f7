import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { killUnderLoad } from '../../chaos/kill-under-load.js';
import { Scope, type Scenario, type ScenarioResult } from '../../chaos/lib/harness.js';
import { receiverOutage } from '../../chaos/receiver-outage.js';

/**
 * The quick variants of `npm run chaos` scenarios 1 and 2, as tests. Their
 * no-loss checks are asserted; a latency check is only reported here, since
 * speed is judged by `npm run chaos` and `npm run bench`, not by tests
 * sharing a busy machine.
 */
async function runQuick(scenario: Scenario, diagnostic: (message: string) => void): Promise<ScenarioResult> {
  const scope = new Scope();
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${scenario.name} still running after ${scenario.timeoutSec(true)} s`)), scenario.timeoutSec(true) * 1000);
  });
  try {
    return await Promise.race([scenario.run({ quick: true, log: diagnostic, defer: (action) => scope.defer(action) }), limit]);
  } finally {
    clearTimeout(timer);
    await scope.close(diagnostic);
  }
}

/**
 * Reported, not asserted: a latency check, and whether one of only three
 * kills landed while raw requests waited for processing (a race the quick
 * variant can lose; test/ingest/raw-processing.test.ts kills with raw
 * requests pending for certain, and `npm run chaos` asserts it over 20 kills).
 */
const TIMED_CHECKS = new Set(["B not slowed by A's outage", 'a kill landed with raw requests unprocessed']);

describe('chaos, quick variants', () => {
  for (const scenario of [killUnderLoad, receiverOutage]) {
    it(`${scenario.name}: ${scenario.summary}`, async (t) => {
      const result = await runQuick(scenario, (message) => t.diagnostic(message));
      for (const check of result.checks) {
        if (TIMED_CHECKS.has(check.name)) {
          t.diagnostic(`reported, not asserted: ${check.name}: ${check.pass ? 'pass' : 'FAIL'} (${check.detail})`);
          continue;
        }
        assert.ok(check.pass, `${check.name}: ${check.detail}`);
      }
      assert.ok(result.checks.length > 0, 'the scenario made its checks');
    });
  }
});
