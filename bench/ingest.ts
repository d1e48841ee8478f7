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
  /** Keep the source's live debugger stream open and read throughout (the cost of a watching admin). */
  readonly withDebuggerStream?: boolean;
}

interface OpenStream {
  /** Messages received on the stream so far. */
  events(): number;
  close(): void;
}

/** Opens GET /admin/v1/sources/:id/debugger/stream and reads it as fast as it comes. */
async function openDebuggerStream(target: Target): Promise<OpenStream> {
  if (target.admin === undefined) throw new Error(`${target.label} has no admin API to stream from`);
  const controller = new AbortController();
  const response = await fetch(`${target.url}/admin/v1/sources/${target.admin.sourceId}/debugger/stream`, {
    headers: { authorization: `Bearer ${target.admin.token}` },
    signal: controller.signal,
  });
  if (response.status !== 200 || response.body === null) throw new Error(`debugger stream answered ${response.status}`);
  let events = 0;
  const decoder = new TextDecoder();
  const reader = response.body.getReader();
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        // One `id:` line per message event.
        events += decoder.decode(value, { stream: true }).split('\nid:').length - 1;
      }
    } catch {
      // aborted by close()
    }
  })();
  return { events: () => events, close: () => controller.abort() };
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
        const stream = spec.withDebuggerStream === true && !context.options.selfCheck ? await openDebuggerStream(switchyard) : undefined;
        let comparison;
        try {
          comparison = await compareUnderLoad(context, { name: spec.name, baseline, switchyard, payload: spec.payload });
        } finally {
          stream?.close();
        }
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
          ...(stream !== undefined && { debuggerStreamEvents: stream.events() }),
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
    name: 'ingest.track.debugger',
    description: 'ingest.track with the source\'s live debugger stream open and read throughout (issue 5: the debugger must not slow ingest)',
    payload: { kind: 'track' },
    metric: 'requests/s',
    target: 0.75,
    withDebuggerStream: true,
  }),
  ingestBench({
    name: 'ingest.batch',
    description: 'POST /v1/batch of 100 ~600-byte messages, each with a new messageId; 200 = all stored',
    payload: { kind: 'batch', size: 100 },
    metric: 'messages/s',
    target: 0.5,
  }),
];
