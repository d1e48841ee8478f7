/**
 * `plan.overhead`: `ingest.live` (`/v1/track` at saturation, a signed
 * Webhooks destination delivering) with a tracking plan on the source, vs
 * the same without one, in the same run. The plan has 100 events, the
 * bench's `Order Completed` among them with every property typed
 * (`required`, `additionalProperties: false`, a pattern), so every message
 * is validated and passes; it runs once with `violations: flag` (the
 * judged ratio) and once with `block` (the same work; reported). The CPU
 * per message the plan adds (the validated side's less the side without)
 * is reported as `planCpuMicrosPerMessage`.
 */
import { availableParallelism } from 'node:os';
import type { BenchDefinition, BenchReport } from './lib/bench-types.js';
import { measure, round, serversGetTwoCpus, summary } from './live.js';

function planOf(violations: 'flag' | 'block'): unknown {
  const events: Record<string, unknown> = {
    'Order Completed': {
      properties: {
        type: 'object',
        properties: { orderId: { type: 'string', pattern: '^o-[0-9]+$' }, revenue: { type: 'number', minimum: 0 }, currency: { type: 'string', enum: ['EUR', 'USD', 'GBP'] } },
        required: ['orderId', 'revenue', 'currency'],
        additionalProperties: false,
      },
    },
  };
  for (let i = 1; i < 100; i++) {
    events[`Event ${i}`] = { properties: { type: 'object', properties: { id: { type: 'string' }, value: { type: 'number' }, tags: { type: 'array', items: { type: 'string' } } }, required: ['id'] } };
  }
  return { name: 'bench', events, controls: { unplannedEvents: 'flag', violations, unplannedProperties: 'allow' } };
}

export const planBenches: readonly BenchDefinition[] = [
  {
    name: 'plan.overhead',
    async run(pinnedContext): Promise<BenchReport> {
      const context = serversGetTwoCpus(pinnedContext);
      const workers = String(Math.max(1, availableParallelism() - 1));
      const none = await measure(context, 'switchyard (no plan)', workers);
      const flag = await measure(context, 'switchyard (plan, flag)', workers, { plan: planOf('flag') });
      const block = await measure(context, 'switchyard (plan, block)', workers, { plan: planOf('block') });
      const ratio = flag.load.requestsPerSec / none.load.requestsPerSec;
      return {
        description: 'ingest.live with a 100-event tracking plan (every message validated, flag) vs the same without a plan',
        metric: 'requests/s',
        ratio: round(ratio, 3),
        target: 0.9,
        pass: ratio >= 0.9 && flag.allDelivered,
        blockRatio: round(block.load.requestsPerSec / none.load.requestsPerSec, 3),
        planCpuMicrosPerMessage: round(flag.cpuMicrosPerMessage - none.cpuMicrosPerMessage, 1),
        cpus: context.cpus.pinned ? `pinned: Switchyard on CPU(s) ${context.cpus.server}` : `unpinned: every process shares ${context.cpus.available.length} CPU(s)`,
        withoutPlan: summary(none),
        flag: summary(flag),
        block: summary(block),
      };
    },
  },
];
