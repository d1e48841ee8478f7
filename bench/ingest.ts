/**
 * Ingest benches (DESIGN.md, "Performance targets"): Switchyard answering
 * the Tracking API, every 200 meaning "stored", against a bare node:http
 * server that only parses the same bodies.
 */
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { compareUnderLoad, comparisonNotes } from './lib/compare-under-load.js';
import { bodyFactory, messagesPerRequest, payloadPath, type PayloadSpec } from './lib/payloads.js';
import type { Target } from './lib/target.js';

interface IngestSpec {
  readonly name: string;
  readonly description: string;
  readonly payload: PayloadSpec;
  /** The figure whose ratio is judged. */
  readonly metric: 'requests/s' | 'messages/s';
  readonly target: number;
}

function ingestBench(spec: IngestSpec): BenchDefinition {
  return {
    name: spec.name,
    async run(context: BenchContext): Promise<BenchReport> {
      const baseline = await context.startBaseline(`${spec.name} baseline`);
      let switchyard: Target | undefined;
      try {
        switchyard = context.options.selfCheck
          ? await context.startBaseline(`${spec.name} second baseline (self-check)`)
          : await context.startSwitchyard(`${spec.name} switchyard`);
        const comparison = await compareUnderLoad(context, { name: spec.name, baseline, switchyard, payload: spec.payload });
        const figure = spec.metric === 'requests/s' ? 'requestsPerSec' : 'messagesPerSec';
        const denominator = comparison.baseline[figure];
        const ratio = denominator > 0 ? Math.round((comparison.switchyard[figure] / denominator) * 1000) / 1000 : 0;
        return {
          description: spec.description,
          metric: spec.metric,
          ratio,
          target: spec.target,
          pass: ratio >= spec.target,
          request: {
            path: payloadPath(spec.payload),
            messagesPerRequest: messagesPerRequest(spec.payload),
            bodyBytes: bodyFactory(spec.payload, 'size-probe')().length,
            connections: context.options.connections,
          },
          switchyard: comparison.switchyard,
          baseline: comparison.baseline,
          roundRatios: comparison.roundRatios,
          phases: comparison.phases,
          notes: comparisonNotes(comparison),
        };
      } finally {
        await switchyard?.stop();
        await baseline.stop();
      }
    },
  };
}

export const ingestBenches: readonly BenchDefinition[] = [
  ingestBench({
    name: 'ingest.track',
    description: 'POST /v1/track, one ~600-byte message per request, each with a new messageId; 200 = stored',
    payload: { kind: 'track' },
    metric: 'requests/s',
    target: 0.75,
  }),
  ingestBench({
    name: 'ingest.batch',
    description: 'POST /v1/batch of 100 ~600-byte messages, each with a new messageId; 200 = all stored',
    payload: { kind: 'batch', size: 100 },
    metric: 'messages/s',
    target: 0.5,
  }),
];
