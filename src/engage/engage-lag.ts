import type { Store } from '../store/store.js';

/**
 * How far behind the Engage evaluator is, in seconds: how long the oldest
 * stored message it has not applied yet has waited since it was received,
 * 0 when it has applied them all. Read from the store (one indexed row) when
 * `/metrics` is scraped, so it is the same on every node of a shared store
 * whichever node holds the Engage lease. A store that cannot answer keeps
 * the last value (reported to `onError`) rather than failing the scrape.
 */
export function engageLagReader(store: Store, now: () => number, onError: (error: unknown) => void): () => Promise<number> {
  let seconds = 0;
  return async () => {
    try {
      const oldest = await store.oldestUnevaluatedMessage();
      seconds = oldest === undefined ? 0 : Math.max(0, now() - oldest.receivedAt) / 1000;
    } catch (error) {
      onError(error);
    }
    return seconds;
  };
}
