import { RateWindow } from '../domain/rate-window.js';
import type { WebhookReceiver } from '../domain/webhook-settings.js';

/**
 * The `maxRequestsPerSecond` caps of this worker's receivers, one sliding
 * window per receiver URL. A round takes a send time for each capped
 * receiver it will POST to; one that would wait longer than `maxWaitMs` puts
 * the whole delivery back in the store (deferred: no attempt counted, nothing
 * dropped), so a capped receiver's backlog never holds more of the worker's
 * delivery slots than its cap lets through in that time.
 *
 * The caps hold per delivery worker: nodes sharing a PostgreSQL store each
 * keep their own windows.
 */
export class ReceiverRates {
  private readonly windows = new Map<string, RateWindow>();

  constructor(private readonly maxWaitMs: number) {}

  /**
   * Reserves a send time for each capped receiver: resolves the latest of
   * them (the round waits until then), or `{deferUntil}` when some receiver
   * has no slot within `maxWaitMs`.
   */
  reserve(receivers: readonly WebhookReceiver[], now: number): { sendAt: number } | { deferUntil: number } {
    let sendAt = now;
    for (const receiver of receivers) {
      const cap = receiver.maxRequestsPerSecond;
      if (cap === undefined) continue;
      const window = this.window(receiver.url, cap);
      const at = window.reserve(now, this.maxWaitMs);
      // Times reserved for the receivers before this one go unused: they only
      // lower those receivers' rate a little, never raise it past the cap.
      if (at === undefined) return { deferUntil: window.nextFree(now) };
      sendAt = Math.max(sendAt, at);
    }
    return { sendAt };
  }

  private window(url: string, cap: number): RateWindow {
    let window = this.windows.get(url);
    if (window === undefined || window.limit !== cap) this.windows.set(url, (window = new RateWindow(cap)));
    return window;
  }
}
