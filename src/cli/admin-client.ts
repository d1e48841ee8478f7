import { setTimeout as sleep } from 'node:timers/promises';
import { DebuggerAdmin, type DebuggerEntry, viewMessage } from '../admin/debugger-admin.js';
import { DeliveryAdmin } from '../admin/delivery-admin.js';
import { EngageAdmin } from '../admin/engage-admin.js';
import { FunctionAdmin } from '../admin/function-admin.js';
import { ReplayAdmin } from '../admin/replay-admin.js';
import { SourceAdmin } from '../admin/source-admin.js';
import { TrackingPlanAdmin } from '../admin/tracking-plan-admin.js';
import { TransformationAdmin } from '../admin/transformation-admin.js';
import { WebhookAdmin } from '../admin/webhook-admin.js';
import { sandboxLimits } from '../sandbox/sandbox-limits.js';
import type { Config } from '../config.js';
import type { Store } from '../store/store.js';

/** Prints new debugger messages after `afterSeq` (after the newest now when undefined) until `signal` aborts. */
export type FollowDebugger = (sourceId: string, afterSeq: number | undefined, print: (entry: DebuggerEntry) => void, signal: AbortSignal) => Promise<void>;

/**
 * What the admin commands call, with the admin services' own method names
 * and answers: either those services on the store (direct mode) or a running
 * server's admin API (`--url`), so each command is written once and prints
 * the same in both.
 */
export interface AdminClient {
  readonly sources: Pick<SourceAdmin, 'list' | 'create' | 'get' | 'update' | 'delete'>;
  readonly webhooks: Pick<WebhookAdmin, 'get' | 'put' | 'delete' | 'standardSecret' | 'rotateStandardSecret'>;
  readonly deliveries: Pick<DeliveryAdmin, 'list' | 'get' | 'retry' | 'retryAll'>;
  readonly replays: Pick<ReplayAdmin, 'create' | 'list' | 'get' | 'cancel'>;
  readonly engage: Pick<EngageAdmin, 'list' | 'create' | 'get' | 'update' | 'remove' | 'members' | 'profile' | 'events'>;
  readonly debugger: Pick<DebuggerAdmin, 'list'> & { readonly follow: FollowDebugger };
  readonly trackingPlans: Pick<TrackingPlanAdmin, 'get' | 'put' | 'delete' | 'violations' | 'observedSchema' | 'draftFromSchema'>;
  readonly transformations: Pick<TransformationAdmin, 'list' | 'create' | 'update' | 'get' | 'getVersion' | 'delete' | 'test'>;
  readonly functions: Pick<FunctionAdmin, 'list' | 'create' | 'get' | 'update' | 'delete' | 'test'>;
}

/** What the CLI's entry point lends the command modules. */
export interface CliKit {
  /** Connects where the flags and environment say (a server or a store), runs `run`, prints its JSON result, disconnects. */
  readonly withAdmin: (flags: Record<string, string | true>, run: (admin: AdminClient) => Promise<unknown>) => Promise<void>;
  /** An error that makes the CLI print its usage and exit with 2. */
  readonly usageError: (message: string) => Error;
}

const FOLLOW_POLL_MS = 500;
const FOLLOW_PAGE = 500;

/**
 * The admin services on the store directly, validating exactly as the admin
 * API does (private-address check included, by this process's setting).
 * A running server picks up what they write through its config poll.
 */
export function storeAdminClient(store: Store, options: Pick<Config, 'allowPrivateReceivers' | 'userAgent' | 'deliveryTimeoutMs' | 'sandbox'>): AdminClient {
  const debuggerAdmin = new DebuggerAdmin(store);
  return {
    sources: new SourceAdmin(store, Date.now),
    webhooks: new WebhookAdmin(store, Date.now, { allowPrivateReceivers: options.allowPrivateReceivers }),
    deliveries: new DeliveryAdmin(store, Date.now),
    replays: new ReplayAdmin(store, { now: Date.now }),
    engage: new EngageAdmin(store, { now: Date.now }),
    debugger: {
      list: (sourceId, query) => debuggerAdmin.list(sourceId, query),
      follow: async (sourceId, afterSeq, print, signal) =>
        pollMessages(store, sourceId, afterSeq ?? (await debuggerAdmin.streamCursor(sourceId, undefined)), print, signal),
    },
    trackingPlans: new TrackingPlanAdmin(store, Date.now),
    transformations: new TransformationAdmin(store, Date.now, sandboxLimits(options.sandbox)),
    // `functions test` runs here, under this process's network rules (as `webhooks set` checks receivers by them).
    functions: new FunctionAdmin(store, Date.now, {
      limits: sandboxLimits(options.sandbox),
      allowPrivateReceivers: options.allowPrivateReceivers,
      userAgent: options.userAgent,
      deliveryTimeoutMs: options.deliveryTimeoutMs,
    }),
  };
}

/** Following on the store polls it: another process writes it, so there are no notifications to wait for. */
async function pollMessages(store: Store, sourceId: string, afterSeq: number, print: (entry: DebuggerEntry) => void, signal: AbortSignal): Promise<void> {
  let cursor = afterSeq;
  while (!signal.aborted) {
    // Up to the settled seq: a message committed late below the cursor would be passed over for good.
    const page = await store.listMessagesAfter(sourceId, cursor, FOLLOW_PAGE, (await store.settledMessageSeq()).seq);
    for (const message of page) {
      print(viewMessage(message));
      cursor = message.seq;
    }
    if (page.length < FOLLOW_PAGE) await sleep(FOLLOW_POLL_MS, undefined, { signal }).catch(() => undefined);
  }
}
