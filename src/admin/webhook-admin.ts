import { randomBytes } from 'node:crypto';
import { findPrivateAddress, resolveAll, type ResolveAll } from '../delivery/address-guard.js';
import { isJsonObject } from '../domain/message.js';
import {
  DEFAULT_OVERLAP_SECONDS,
  MASKED_STANDARD_SECRET,
  MAX_OVERLAP_SECONDS,
  type StandardWebhooksSettings,
  formatSecret,
} from '../domain/standard-webhooks.js';
import { ConditionError } from '../domain/conditions.js';
import { type DestinationFilter, parseFilters } from '../domain/destination-filters.js';
import { type WebhookOrdering, type WebhookSettings, keepMaskedHeaders, maskReceivers, parseWebhookSettings } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import type { SourceDirectory } from '../sources/source-directory.js';
import type { DestinationRecord, Store } from '../store/store.js';
import { isTime, optionalBoolean, refuseNul, rejectUnknownFields, requireObject } from './validate.js';

/** What GET shows instead of the shared secret. Sending it back in a PUT keeps the stored secret. */
export const MASKED_SECRET = '********';

/** A Webhooks destination as the admin API and the CLI show it. */
export interface WebhookView {
  readonly sourceId: string;
  readonly enabled: boolean;
  readonly settings: {
    readonly webhooks: WebhookSettings['webhooks'];
    readonly sharedSecret?: string;
    readonly standardWebhooks?: { readonly secret: string; readonly previousValidUntil?: string };
    readonly transformation?: WebhookSettings['transformation'];
    /** Shown when it is `user`; absent means `none`. */
    readonly ordering?: WebhookOrdering;
  };
  readonly filters: readonly DestinationFilter[];
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

  /** Removes the destination; deliveries still pending for it fail, saying so. */
  async delete(sourceId: string): Promise<void> {
    await this.requireSource(sourceId);
    if (!(await this.store.deleteDestination(sourceId, 'webhooks'))) throw new ApiError('not_found', `source ${sourceId} has no Webhooks destination`);
    await this.options.directory?.reload();
  }

  /** Replaces the destination: `{enabled?, settings: {webhooks, sharedSecret?, standardWebhooks?}, filters?}`. */
  async put(sourceId: string, input: unknown): Promise<WebhookView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['enabled', 'settings', 'filters']);
    const filters = checkedFilters(body['filters']);
    const enabled = optionalBoolean(body['enabled'], 'enabled') ?? true;
    await this.requireSource(sourceId);

    let rawSettings = body['settings'];
    const previous = await this.store.getDestination(sourceId, 'webhooks');
    if (isJsonObject(rawSettings) && rawSettings['sharedSecret'] === MASKED_SECRET) {
      // A GET, edited and PUT back, carries the mask: keep the secret it stands for.
      const kept = isJsonObject(previous?.settings) ? previous.settings['sharedSecret'] : undefined;
      // With no secret stored, the mask stands for nothing: refused rather than leaving deliveries unsigned unnoticed.
      if (typeof kept !== 'string') {
        throw new ApiError('invalid_receivers', `settings.sharedSecret is the mask ${MASKED_SECRET}, but no secret is stored for it to keep; send the secret itself, or leave sharedSecret out to send unsigned`);
      }
      rawSettings = { ...rawSettings, sharedSecret: kept };
    }
    if (isJsonObject(rawSettings) && Array.isArray(rawSettings['webhooks'])) {
      // Credential-looking static headers read back as the mask: keep what they stand for.
      const storedReceivers = isJsonObject(previous?.settings) ? parseWebhookSettings(previous.settings) : undefined;
      const kept = keepMaskedHeaders(rawSettings['webhooks'], storedReceivers?.ok === true ? storedReceivers.settings.webhooks : []);
      if (!kept.ok) throw new ApiError('invalid_receivers', kept.problem);
      rawSettings = { ...rawSettings, webhooks: kept.webhooks };
    }
    if (isJsonObject(rawSettings) && rawSettings['filters'] !== undefined) {
      throw new ApiError('invalid_filter', 'settings.filters: filters go beside settings, as "filters"');
    }
    if (isJsonObject(rawSettings) && filters.length > 0) rawSettings = { ...rawSettings, filters };
    if (isJsonObject(rawSettings) && rawSettings['standardWebhooks'] !== undefined && rawSettings['standardWebhooks'] !== null) {
      rawSettings = { ...rawSettings, standardWebhooks: completeStandardWebhooks(rawSettings['standardWebhooks'], previous) };
    }
    const parsed = parseWebhookSettings(rawSettings);
    if (!parsed.ok) throw new ApiError('invalid_receivers', parsed.problem);
    if (!this.options.allowPrivateReceivers) await this.refusePrivate(parsed.settings);
    const ref = parsed.settings.transformation;
    refuseNul(ref?.id, 'settings.transformation.id', 'invalid_receivers');
    if (ref !== undefined && (await this.store.getTransformationVersion(ref.id, ref.version)) === undefined) {
      throw new ApiError('invalid_receivers', `settings.transformation: no transformation ${JSON.stringify(ref.id)}${ref.version === undefined ? '' : ` with version ${ref.version}`}`);
    }

    const destination: DestinationRecord = { sourceId, kind: 'webhooks', enabled, settings: parsed.settings, updatedAt: this.now() };
    await this.store.putDestination(destination);
    await this.options.directory?.reload();
    return viewWebhooks(destination);
  }

  /** The Standard Webhooks secret in clear, for the receiver's configuration. */
  async standardSecret(sourceId: string): Promise<{ secret: string }> {
    const { settings } = await this.requireStandardWebhooks(sourceId);
    return { secret: settings.secret };
  }

  /**
   * Replaces the Standard Webhooks secret with a new random one; the old one
   * keeps signing (second in `webhook-signature`) for `overlapSeconds`, so
   * receivers can switch without rejecting a request.
   */
  async rotateStandardSecret(sourceId: string, input: unknown): Promise<{ secret: string; previousValidUntil: string }> {
    const body = input === undefined || input === null ? {} : requireObject(input);
    rejectUnknownFields(body, ['overlapSeconds']);
    const overlap = body['overlapSeconds'] ?? DEFAULT_OVERLAP_SECONDS;
    if (typeof overlap !== 'number' || !Number.isInteger(overlap) || overlap < 0 || overlap > MAX_OVERLAP_SECONDS) {
      throw new ApiError('invalid_request', `overlapSeconds must be an integer from 0 to ${MAX_OVERLAP_SECONDS}`);
    }
    const { destination, settings } = await this.requireStandardWebhooks(sourceId);
    const now = this.now();
    const rotated: StandardWebhooksSettings = {
      secret: newStandardSecret(),
      previousSecret: settings.secret,
      previousValidUntil: now + overlap * 1000,
    };
    const current = destination.settings as Record<string, unknown>;
    await this.store.putDestination({ ...destination, settings: { ...current, standardWebhooks: rotated }, updatedAt: now });
    await this.options.directory?.reload();
    return { secret: rotated.secret, previousValidUntil: new Date(rotated.previousValidUntil!).toISOString() };
  }

  private async requireStandardWebhooks(sourceId: string): Promise<{ destination: DestinationRecord; settings: StandardWebhooksSettings }> {
    await this.requireSource(sourceId);
    const destination = await this.store.getDestination(sourceId, 'webhooks');
    if (destination === undefined) throw new ApiError('not_found', `source ${sourceId} has no Webhooks destination`);
    const parsed = parseWebhookSettings(destination.settings);
    const settings = parsed.ok ? parsed.settings.standardWebhooks : undefined;
    if (settings === undefined) {
      throw new ApiError('standard_webhooks_not_enabled', `source ${sourceId}'s Webhooks destination does not sign with Standard Webhooks; PUT settings.standardWebhooks: {} to turn it on`);
    }
    return { destination, settings };
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

function checkedFilters(input: unknown): DestinationFilter[] {
  try {
    return parseFilters(input);
  } catch (error) {
    if (error instanceof ConditionError) throw new ApiError('invalid_filter', error.message, { cause: error });
    throw error;
  }
}

/** A new random secret: 32 bytes, within the spec's 24 to 64. */
function newStandardSecret(): string {
  return formatSecret(randomBytes(32));
}

/**
 * Turns the admin API's `standardWebhooks` into stored settings: `{}` makes a
 * new secret, the mask keeps the stored one (with a rotation in progress),
 * a given secret replaces it. The rotation fields are Switchyard's own.
 * `previousValidUntil` is what GET shows of a rotation in progress: taken
 * (and ignored) beside the mask, so that what GET returns can be sent back,
 * as the CLI does; a rotation's end is set by rotating, never by a PUT.
 */
function completeStandardWebhooks(input: unknown, previous: DestinationRecord | undefined): unknown {
  if (!isJsonObject(input)) return input; // the parser names the problem
  rejectUnknownFields(input, ['secret', 'previousValidUntil'], 'settings.standardWebhooks');
  const secret = input['secret'];
  const shownUntil = input['previousValidUntil'];
  if (shownUntil !== undefined && secret !== MASKED_STANDARD_SECRET) {
    throw new ApiError(
      'invalid_receivers',
      'settings.standardWebhooks.previousValidUntil is set by POST …/standard-webhooks/rotate; send it only beside the masked secret, as GET shows it',
    );
  }
  // Ignored, but it must still be what GET shows: a time, not anything at all.
  if (shownUntil !== undefined && (typeof shownUntil !== 'string' || !isTime(shownUntil))) {
    throw new ApiError('invalid_receivers', `settings.standardWebhooks.previousValidUntil must be an ISO-8601 time, as GET shows it (it is ignored: a rotation's end is set by rotating)`);
  }
  if (secret === undefined || secret === null) return { secret: newStandardSecret() };
  if (secret !== MASKED_STANDARD_SECRET) return { secret };
  const stored = previous === undefined ? undefined : parseWebhookSettings(previous.settings);
  const kept = stored?.ok ? stored.settings.standardWebhooks : undefined;
  if (kept === undefined) {
    throw new ApiError('invalid_receivers', 'settings.standardWebhooks.secret is the mask, but no secret is stored to keep; send {} to generate one');
  }
  return kept;
}

export function viewWebhooks(destination: DestinationRecord, now: number = Date.now()): WebhookView {
  const parsed = parseWebhookSettings(destination.settings);
  const settings: WebhookSettings = parsed.ok ? parsed.settings : { webhooks: [] };
  const standard = settings.standardWebhooks;
  const overlapping = standard?.previousValidUntil !== undefined && standard.previousValidUntil > now;
  return {
    sourceId: destination.sourceId,
    enabled: destination.enabled,
    settings: {
      webhooks: maskReceivers(settings.webhooks),
      ...(settings.sharedSecret !== undefined && { sharedSecret: MASKED_SECRET }),
      ...(standard !== undefined && {
        standardWebhooks: {
          secret: MASKED_STANDARD_SECRET,
          ...(overlapping && { previousValidUntil: new Date(standard.previousValidUntil).toISOString() }),
        },
      }),
      ...(settings.transformation !== undefined && { transformation: settings.transformation }),
      ...(settings.ordering === 'user' && { ordering: settings.ordering }),
    },
    filters: settings.filters ?? [],
    updatedAt: new Date(destination.updatedAt).toISOString(),
  };
}
