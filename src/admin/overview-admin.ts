import { MINUTE_MS, type TrafficSeries, minuteOf, trafficSeries } from '../domain/traffic.js';
import type { Store } from '../store/store.js';
import { integerParam } from './validate.js';

const DEFAULT_MINUTES = 60;
const MAX_MINUTES = 24 * 60;
/**
 * Every status the debugger shows a message with, each message counted once
 * under its current one: `filtered` and `failed` include what a
 * transformation dropped or failed on (moved from `accepted` when it ran).
 */
const MESSAGE_STATUSES = ['accepted', 'rejected', 'duplicate', 'suppressed', 'filtered', 'blocked', 'failed'] as const;
const DELIVERY_OUTCOMES = ['succeeded', 'retried', 'failed'] as const;

export interface OverviewView {
  readonly from: string;
  readonly to: string;
  /** The start of each minute of the range, oldest first. */
  readonly minutes: readonly string[];
  readonly messages: { readonly total: number; readonly byStatus: TrafficSeries['counts'] };
  readonly deliveries: { readonly total: number; readonly byOutcome: TrafficSeries['counts'] };
}

/**
 * The console's overview: messages received per minute by status and
 * delivery rounds per minute by outcome, read from the store's counters,
 * so every node answers the same.
 */
export class OverviewAdmin {
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
  ) {}

  /** The last `minutes` minutes (1 to 1440, default 60), the current minute included. */
  async traffic(query: { minutes?: unknown }): Promise<OverviewView> {
    const count = minutesParam(query.minutes);
    const to = minuteOf(this.now()) + MINUTE_MS;
    const from = to - count * MINUTE_MS;
    const rows = await this.store.trafficSince(from);
    const messages = trafficSeries(rows, 'messages', from, to, MESSAGE_STATUSES);
    const deliveries = trafficSeries(rows, 'deliveries', from, to, DELIVERY_OUTCOMES);
    return {
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      minutes: messages.minutes.map((minute) => new Date(minute).toISOString()),
      messages: { total: messages.total, byStatus: messages.counts },
      deliveries: { total: deliveries.total, byOutcome: deliveries.counts },
    };
  }
}

function minutesParam(value: unknown): number {
  if (value === undefined || value === '') return DEFAULT_MINUTES;
  return integerParam(value, 'minutes', 1, MAX_MINUTES);
}
