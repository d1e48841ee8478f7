import type { IngestEntry } from '../store/store.js';
import type { TraceSpan, Tracing } from '../telemetry/tracing.js';

/** The syncs of one Engage commit, each in its span when tracing is on. */
export interface TracedSyncs {
  /** The entries to commit: each sync carries its span's traceparent, so its delivery's spans join the trace. */
  readonly messages: readonly IngestEntry[];
  /** Ends the spans once the commit is decided (refused: a computation changed meanwhile; nothing was queued). */
  end(committed: boolean): void;
}

/**
 * A span per Engage sync (a new trace each: a sync follows from many
 * messages, not from one request), named `engage sync`, with the
 * computation it syncs. Off: the entries as they are, nothing started.
 */
export function traceSyncs(tracing: Tracing | undefined, messages: readonly IngestEntry[]): TracedSyncs {
  if (tracing?.enabled !== true || messages.length === 0) return { messages, end: () => {} };
  const spans: TraceSpan[] = [];
  const traced = messages.map((entry) => {
    if (entry.engageSync === undefined) return entry;
    const span = tracing.startSpan('engage sync', {
      kind: 'producer',
      attributes: { 'switchyard.source.id': entry.sourceId, 'switchyard.engage.computation.id': entry.engageSync.computationId, 'switchyard.message.id': entry.messageId },
    });
    spans.push(span);
    return { ...entry, traceparent: span.traceparent };
  });
  return {
    messages: traced,
    end(committed) {
      for (const span of spans) {
        if (!committed) span.fail('not committed: a computation it syncs was changed or deleted meanwhile');
        span.end();
      }
    },
  };
}
