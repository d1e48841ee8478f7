/**
 * `transform.live` (issue 24): `ingest.live` (`/v1/track` at saturation, a
 * signed Webhooks destination delivering) with a small transformation
 * attached (it adds one property), against the same without it, in the
 * same run: ≥ 0.85. Every message runs in the transformation's isolate
 * before its delivery. The CPU per message the transformation adds (the
 * transformed side's less the plain side's) is reported as
 * `transformCpuMicrosPerMessage`.
 */
import { availableParallelism } from 'node:os';
import type { BenchDefinition, BenchReport } from './lib/bench-types.js';
import { measure, round, serversGetTwoCpus, summary } from './live.js';

const TARGET = 0.85;

/** The "small transformation": one property added, RudderStack's code shape. */
const ADD_ONE_PROPERTY = `export function transformEvent(event, metadata) {
  event.properties = event.properties || {};
  event.properties.transformedBy = 'switchyard-bench';
  return event;
}`;

export const transformBenches: readonly BenchDefinition[] = [
  {
    name: 'transform.live',
    async run(pinnedContext): Promise<BenchReport> {
      const context = serversGetTwoCpus(pinnedContext);
      const workers = String(Math.max(1, availableParallelism() - 1));
      const plain = await measure(context, 'switchyard (no transformation)', workers);
      const transformed = await measure(context, 'switchyard (transformation attached)', workers, { transformation: ADD_ONE_PROPERTY });
      const ratio = transformed.load.requestsPerSec / plain.load.requestsPerSec;
      return {
        description: 'ingest.live with a transformation that adds one property attached to the Webhooks destination vs the same without it',
        metric: 'requests/s',
        ratio: round(ratio, 3),
        target: TARGET,
        pass: ratio >= TARGET && transformed.allDelivered,
        transformCpuMicrosPerMessage: round(transformed.cpuMicrosPerMessage - plain.cpuMicrosPerMessage, 1),
        cpus: context.cpus.pinned ? `pinned: Switchyard on CPU(s) ${context.cpus.server}` : `unpinned: every process shares ${context.cpus.available.length} CPU(s)`,
        withoutTransformation: summary(plain),
        transformed: summary(transformed),
      };
    },
  },
];
