import { findPrivateAddress, resolveAll, type ResolveAll } from '../delivery/address-guard.js';
import { isJsonObject } from '../domain/message.js';
import { type WebhookSettings, parseWebhookSettings } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { DestinationRecord, Store } from '../store/store.js';
import { optionalBoolean, rejectUnknownFields, requireObject } from './validate.js';

/** What GET shows instead of the shared secret. Sending it back in a PUT keeps the stored secret. */
export const MASKED_SECRET = '********';

/** A Webhooks destination as the admin API and the CLI show it. */
export interface WebhookView {
  readonly sourceId: string;
  readonly enabled: boolean;
  readonly settings: {
    readonly webhooks: WebhookSettings['webhooks'];
    readonly sharedSecret?: string;
  };
  readonly updatedAt: string;
}

export interface WebhookAdminOptions {
  readonly allowPrivateReceivers: boolean;
  /** Present in a serving process, so its own changes apply at once. */
  readonly directory?: SourceDirectory | undefined;
  /** How receiver host names are resolved for the private-address check. */
  readonly resolve?: ResolveAll | undefined;
}

/**
 * The Webhooks destination's settings, shared by the admin HTTP routes and the
 * CLI so both validate alike, the private-address check included.
 */
export class WebhookAdmin {
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    private readonly options: WebhookAdminOptions,
  ) {}

  async get(sourceId: string): Promise<WebhookView> {
    await this.requireSource(sourceId);
    const destination = await this.store.getDestination(sourceId, 'webhooks');
    if (destination === undefined) throw new ApiError('not_found', `source ${sourceId} has no Webhooks destination`);
    return viewWebhooks(destination);
  }

  /** Replaces the destination: `{enabled?, settings: {webhooks, sharedSecret?}}`. */
  async put(sourceId: string, input: unknown): Promise<WebhookView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['enabled', 'settings']);
    const enabled = optionalBoolean(body['enabled'], 'enabled') ?? true;
    await this.requireSource(sourceId);

    let rawSettings = body['settings'];
    const previous = await this.store.getDestination(sourceId, 'webhooks');
    if (isJsonObject(rawSettings) && rawSettings['sharedSecret'] === MASKED_SECRET) {
      // A GET, edited and PUT back, carries the mask: keep the secret it stands for.
      const kept = isJsonObject(previous?.settings) ? previous.settings['sharedSecret'] : undefined;
      rawSettings = { ...rawSettings, sharedSecret: typeof kept === 'string' ? kept : undefined };
    }
    const parsed = parseWebhookSettings(rawSettings);
    if (!parsed.ok) throw new ApiError('invalid_receivers', parsed.problem);
    if (!this.options.allowPrivateReceivers) await this.refusePrivate(parsed.settings);

    const destination: DestinationRecord = { sourceId, kind: 'webhooks', enabled, settings: parsed.settings, updatedAt: this.now() };
    await this.store.putDestination(destination);
    await this.options.directory?.reload();
    return viewWebhooks(destination);
  }

  private async refusePrivate(settings: WebhookSettings): Promise<void> {
    const resolve = this.options.resolve ?? resolveAll;
    await Promise.all(
      settings.webhooks.map(async (receiver, index) => {
        const at = `settings.webhooks[${index}].url`;
        const host = new URL(receiver.url).hostname;
        let address: string | undefined;
        try {
          address = await findPrivateAddress(host, resolve);
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          throw new ApiError('invalid_receivers', `${at}: host ${host} does not resolve${typeof code === 'string' ? ` (${code})` : ''}`, { cause: error });
        }
        if (address !== undefined) {
          throw new ApiError(
            'private_receiver',
            `${at}: ${host} resolves to ${address}, a loopback, private, link-local or metadata address; set SWITCHYARD_ALLOW_PRIVATE_RECEIVERS=true to allow such receivers`,
          );
        }
      }),
    );
  }

  private async requireSource(sourceId: string): Promise<void> {
    if ((await this.store.getSource(sourceId)) === undefined) {
      throw new ApiError('not_found', `no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
    }
  }
}

export function viewWebhooks(destination: DestinationRecord): WebhookView {
  const parsed = parseWebhookSettings(destination.settings);
  const settings = parsed.ok ? parsed.settings : { webhooks: [] };
  return {
    sourceId: destination.sourceId,
    enabled: destination.enabled,
    settings: {
      webhooks: settings.webhooks,
      ...(settings.sharedSecret !== undefined && { sharedSecret: MASKED_SECRET }),
    },
    updatedAt: new Date(destination.updatedAt).toISOString(),
  };
}
