import type { Config } from '../config.js';
import type { HeldCircuit } from '../domain/circuits.js';
import type { SuppressionList } from '../regulations/suppression-list.js';
import type { Store } from '../store/store.js';
import type { AdminAuth } from './admin-auth.js';
import type { AdminRoutesOptions } from './admin-routes.js';
import { DebuggerAdmin } from './debugger-admin.js';
import { debuggerRoutes } from './debugger-routes.js';
import { DeliveryAdmin } from './delivery-admin.js';
import { deliveryRoutes } from './delivery-routes.js';
import { EngageAdmin } from './engage-admin.js';
import { engageRoutes } from './engage-routes.js';
import { OverviewAdmin } from './overview-admin.js';
import { overviewRoutes } from './overview-routes.js';
import { RegulationAdmin } from './regulation-admin.js';
import { regulationRoutes } from './regulation-routes.js';
import { ReplayAdmin } from './replay-admin.js';
import { replayRoutes } from './replay-routes.js';
import type { SourceAdmin } from './source-admin.js';
import { TransformationAdmin } from './transformation-admin.js';
import { FunctionAdmin } from './function-admin.js';
import { functionRoutes } from './function-routes.js';
import { transformationRoutes } from './transformation-routes.js';
import { sandboxLimits } from '../sandbox/sandbox-limits.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import { TrackingPlanAdmin } from './tracking-plan-admin.js';
import { TrackingPlanPreview, trackingPlanPreviewRoutes } from './tracking-plan-preview.js';
import { trackingPlanRoutes } from './tracking-plan-routes.js';
import type { WebhookAdmin } from './webhook-admin.js';
import { WebhookTester } from './webhook-test.js';

/** What the admin API wakes in the background stages when it creates work for them, and asks of them. */
export interface StageWakeups {
  wakeRegulations(): void;
  wakeReplays(): void;
  engageDefinitionsChanged(): void;
  /** The circuits this node's delivery worker holds; undefined when it cannot say. */
  circuits(): Promise<readonly HeldCircuit[] | undefined>;
}

export interface AdminApiDeps {
  readonly store: Store;
  readonly config: Pick<Config, 'allowPrivateReceivers' | 'userAgent' | 'deliveryTimeoutMs' | 'sandbox'>;
  readonly now: () => number;
  readonly auth: AdminAuth;
  /** Built by `serve` before the API, which also uses them (the default source, the directory's reloads). */
  readonly sources: SourceAdmin;
  readonly webhooks: WebhookAdmin;
  readonly suppressions: SuppressionList;
  /** The background stages once started (undefined until then: nothing to wake). */
  readonly stages: () => StageWakeups | undefined;
  readonly onError: (error: unknown) => void;
  /** This node's directory, reloaded after a tracking-plan change before it is answered. */
  readonly directory?: SourceDirectory;
}

/**
 * Every route group of the admin API under `/admin/v1`, with the services
 * behind them: the one place a new group is registered (`adminRoutes`
 * mounts them in its authenticated scope).
 */
export function adminApi(deps: AdminApiDeps): AdminRoutesOptions {
  const { store, config, now, stages } = deps;
  return {
    auth: deps.auth,
    sources: deps.sources,
    extensions: [
      deliveryRoutes(
        deps.webhooks,
        new DeliveryAdmin(store, now, {
          circuits: () => stages()?.circuits() ?? Promise.resolve(undefined),
          receivers: (sourceId) => {
            const check = deps.directory?.webhooks(sourceId)?.check;
            return check?.ok === true ? check.settings.webhooks.map((receiver) => receiver.url) : [];
          },
        }),
        new WebhookTester(store, { allowPrivateReceivers: config.allowPrivateReceivers, userAgent: config.userAgent, timeoutMs: config.deliveryTimeoutMs, now }),
      ),
      debuggerRoutes({ admin: new DebuggerAdmin(store), streamStore: store, onError: deps.onError }),
      regulationRoutes(new RegulationAdmin(store, { now, suppressions: deps.suppressions, runner: { wake: () => stages()?.wakeRegulations() } })),
      replayRoutes(new ReplayAdmin(store, { now, onCreated: () => stages()?.wakeReplays() })),
      engageRoutes(new EngageAdmin(store, { now, onChange: () => stages()?.engageDefinitionsChanged() })),
      overviewRoutes(new OverviewAdmin(store, now)),
      transformationRoutes(new TransformationAdmin(store, now, sandboxLimits(config.sandbox))),
      trackingPlanRoutes(new TrackingPlanAdmin(store, now, deps.directory)),
      functionRoutes(
        new FunctionAdmin(store, now, {
          limits: sandboxLimits(config.sandbox),
          allowPrivateReceivers: config.allowPrivateReceivers,
          userAgent: config.userAgent,
          deliveryTimeoutMs: config.deliveryTimeoutMs,
          directory: deps.directory,
        }),
      ),
      trackingPlanPreviewRoutes(new TrackingPlanPreview(store)),
    ],
  };
}
