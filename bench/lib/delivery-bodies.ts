/**
 * Messages for the delivery benches. The backlog is written straight into
 * the store, so the stored text must be what ingest would have stored: the
 * template goes once through Switchyard's own normalizer (`entriesForCall`)
 * and the webhook payload through its own mapper (`webhookBody`); only the
 * messageId and userId are then stitched in per message, which keeps a
 * million messages cheap to make.
 *
 * The baseline poster builds its bodies with the same functions from the
 * same arguments, so it POSTs byte for byte what Switchyard POSTs.
 */
import { entriesForCall } from '../../src/ingest/build-entries.js';
import { webhookBody } from '../../src/domain/webhook-payload.js';
import type { JsonObject } from '../../src/domain/message.js';
import type { DeliveryTarget } from '../../src/domain/routing.js';
import { DEDUPLICATION_WINDOW_MS } from '../../src/domain/message.js';
import type { IngestEntry, IngestStore, SourceRecord } from '../../src/store/store.js';
import { bodyFactory } from './payloads.js';

const ID_MARK = '__SWBENCHID__';
const USER_MARK = '__SWBENCHUSER__';
const SPLIT = new RegExp(`(${ID_MARK}|${USER_MARK})`);

export interface MessageSpec {
  /** Prefix of every messageId: unique per store and run. */
  readonly idPrefix: string;
  /** The `receivedAt` of every message (the stored text contains it). */
  readonly receivedAt: number;
}

/** A ~600-byte track call as the ingest benches send it, with markers in place of the ids. */
function rawTemplate(): JsonObject {
  const raw = JSON.parse(bodyFactory({ kind: 'track' }, 'template')()) as JsonObject;
  raw['messageId'] = ID_MARK;
  raw['userId'] = USER_MARK;
  const properties = raw['properties'] as JsonObject;
  properties['orderId'] = `ord-${ID_MARK}`;
  return raw;
}

function stitcher(template: string): (index: number, idPrefix: string) => string {
  const parts = template.split(SPLIT);
  return (index, idPrefix) => {
    let out = '';
    for (const part of parts) {
      if (part === ID_MARK) out += `${idPrefix}-${index}`;
      else if (part === USER_MARK) out += `user-${index % 5000}`;
      else out += part;
    }
    return out;
  };
}

/** The stored message text for each index, as ingest would store it. */
function storedTemplate(source: SourceRecord, spec: MessageSpec): string {
  const [entry] = entriesForCall(rawTemplate(), 'track', {
    source,
    destinations: ['webhooks'],
    webhookFilters: [],
    receivedAt: spec.receivedAt,
    receivedAtIso: new Date(spec.receivedAt).toISOString(),
    ip: '127.0.0.1',
    newMessageId: () => 'unused',
  });
  if (entry?.status !== 'accepted' || !entry.destinations.includes('webhooks')) {
    throw new Error(`the bench message template is not accepted for webhooks: ${JSON.stringify(entry)}`);
  }
  return entry.body;
}

/**
 * Makes the accepted ingest entries `from` … `from + count - 1`, each with
 * one delivery job per destination (`webhooks`, or `function:<id>`).
 */
export function entryMaker(source: SourceRecord, spec: MessageSpec, destinations: readonly DeliveryTarget[] = ['webhooks']): (from: number, count: number) => IngestEntry[] {
  const body = stitcher(storedTemplate(source, spec));
  return (from, count) => {
    const entries: IngestEntry[] = new Array<IngestEntry>(count);
    for (let i = 0; i < count; i++) {
      const index = from + i;
      entries[i] = {
        sourceId: source.id,
        status: 'accepted',
        type: 'track',
        messageId: `${spec.idPrefix}-${index}`,
        userId: `user-${index % 5000}`,
        receivedAt: spec.receivedAt,
        body: body(index, spec.idPrefix),
        destinations: [...destinations],
      };
    }
    return entries;
  };
}

/**
 * The webhook body Switchyard POSTs for message `index`. The stored text
 * does not depend on the source beyond the id, so a stand-in source serves.
 */
export function webhookBodyMaker(spec: MessageSpec): (index: number) => string {
  const source: SourceRecord = { id: 'src_bench', name: 'bench', writeKey: 'unused', enabled: true, createdAt: 0, updatedAt: 0 };
  const payload = webhookBody(storedTemplate(source, spec));
  if (payload === undefined) throw new Error('the bench message template maps to no webhook body');
  const body = stitcher(payload);
  return (index) => body(index, spec.idPrefix);
}

/** Messages per `appendMessages` call when a bench prefills a backlog. */
export const PREFILL_CHUNK = 5_000;

/**
 * Appends entries `0 … count - 1` of `makeEntries` (each chunk made on
 * demand, so a backlog of any size takes one chunk's memory), as messages
 * received at `receivedAt`; throws if any is not stored as accepted.
 */
export async function appendBacklog(
  store: Pick<IngestStore, 'appendMessages'>,
  makeEntries: (from: number, count: number) => IngestEntry[],
  count: number,
  receivedAt: number,
  onProgress?: (done: number) => void,
): Promise<void> {
  for (let done = 0; done < count; ) {
    const size = Math.min(PREFILL_CHUNK, count - done);
    const results = await store.appendMessages(makeEntries(done, size), receivedAt - DEDUPLICATION_WINDOW_MS);
    const refused = results.filter((result) => result.status !== 'accepted').length;
    if (refused > 0) throw new Error(`prefill: ${refused} of ${size} messages were not stored as accepted`);
    done += size;
    onProgress?.(done);
  }
}
