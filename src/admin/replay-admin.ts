import { CALL_TYPES } from '../domain/message.js';
import { MAX_REPLAY_AHEAD_MS, MAX_RUNNING_REPLAYS, isFunctionReceiver } from '../domain/replay.js';
import { parseWebhookSettings } from '../domain/webhook-settings.js';
import { ApiError } from '../errors.js';
import type { ReplayRecord, Store } from '../store/store.js';
import { newReplayId } from '../util/ids.js';
import { limitParam, rejectUnknownFields, requireObject, timeParam } from './validate.js';

/** A replay as the admin API and the CLI show it (times ISO-8601). */
export interface ReplayView {
  readonly id: string;
  readonly sourceId: string;
  readonly from: string;
  readonly to: string;
  readonly receivers?: readonly string[];
  readonly types?: readonly string[];
  readonly events?: readonly string[];
  readonly status: ReplayRecord['status'];
  readonly queued: number;
  readonly delivered: number;
  readonly failed: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

const MAX_EVENTS = 100;
/** Types a replay may name: every call type and `delete`. */
const REPLAY_TYPES: readonly string[] = [...CALL_TYPES, 'delete'];

export interface ReplayAdminOptions {
  readonly now: () => number;
  /** Called once a replay is stored, so the runner starts on it at once. */
  readonly onCreated?: (() => void) | undefined;
}

/** Replays of a source's stored messages; shared by the admin routes and the CLI. */
export class ReplayAdmin {
  constructor(
    private readonly store: Store,
    private readonly options: ReplayAdminOptions,
  ) {}

  async create(sourceId: string, input: unknown): Promise<ReplayView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['from', 'to', 'receivers', 'types', 'events']);
    const from = timeParam(body['from'], 'from');
    const to = timeParam(body['to'], 'to');
    if (from === undefined || to === undefined) throw new ApiError('invalid_request', 'from and to are required ISO-8601 times');
    if (from >= to) throw new ApiError('invalid_request', 'from must be before to');
    const now = this.options.now();
    if (to > now + MAX_REPLAY_AHEAD_MS) {
      throw new ApiError(
        'invalid_request',
        `to must be at most ${MAX_REPLAY_AHEAD_MS / 3_600_000} hours ahead of the server's time (${new Date(now).toISOString()}): a replay runs until its to has passed`,
      );
    }
    const types = stringList(body['types'], 'types', REPLAY_TYPES.length);
    const unknownType = types?.find((type) => !REPLAY_TYPES.includes(type));
    if (unknownType !== undefined) throw new ApiError('invalid_request', `types: "${unknownType.slice(0, 60)}" is not one of ${REPLAY_TYPES.join(', ')}`);
    const events = stringList(body['events'], 'events', MAX_EVENTS);
    const receivers = await this.checkReceivers(sourceId, stringList(body['receivers'], 'receivers', 5));

    const replay = { id: newReplayId(), sourceId, from, to, receivers, types, events, createdAt: now };
    const refused = await this.store.createReplay(replay, MAX_RUNNING_REPLAYS);
    if (refused !== undefined) {
      const where = refused === 'source_limit' ? `source ${sourceId} already has ${MAX_RUNNING_REPLAYS.perSource} replays` : `${MAX_RUNNING_REPLAYS.total} replays of all sources are`;
      const most = refused === 'source_limit' ? 'the most a source may have' : 'the most that may run at once';
      throw new ApiError(
        'too_many_replays',
        `${where} running, ${most}: cancel one (POST /replays/:id/cancel; GET /sources/:id/replays lists them) or wait for one to finish`,
      );
    }
    this.options.onCreated?.();
    return viewReplay({ ...replay, status: 'running', cursor: 0, queued: 0, delivered: 0, failed: 0, updatedAt: now });
  }

  async list(sourceId: string, query: { limit?: unknown }): Promise<{ replays: ReplayView[] }> {
    await this.requireSource(sourceId);
    const replays = await this.store.listReplays(sourceId, limitParam(query.limit, 50, 500));
    return { replays: replays.map(viewReplay) };
  }

  async get(id: string): Promise<ReplayView> {
    const replay = await this.store.getReplay(id);
    if (replay === undefined) throw new ApiError('not_found', `no replay with id ${JSON.stringify(id.slice(0, 60))}`);
    return viewReplay(replay);
  }

  /** Stops a running replay: nothing more is sent. A replay already ended is shown as it is. */
  async cancel(id: string): Promise<ReplayView> {
    const replay = await this.store.endReplay(id, 'cancelled', this.options.now());
    if (replay === undefined) throw new ApiError('not_found', `no replay with id ${JSON.stringify(id.slice(0, 60))}`);
    return viewReplay(replay);
  }

  /**
   * The listed receivers: URLs the Webhooks destination has (compared as
   * normalized URLs) and ids of the source's function destinations.
   */
  private async checkReceivers(sourceId: string, receivers: string[] | undefined): Promise<string[] | undefined> {
    await this.requireSource(sourceId);
    const functions = new Set((await this.store.listFunctionDestinations(sourceId)).map((f) => f.id));
    receivers?.forEach((receiver, index) => {
      if (isFunctionReceiver(receiver) && !functions.has(receiver)) {
        throw new ApiError('unknown_receiver', `receivers[${index}]: ${JSON.stringify(receiver.slice(0, 200))} is not one of the source's function destinations`);
      }
    });
    // Function destinations only: the Webhooks destination is not needed.
    if (receivers !== undefined && receivers.every(isFunctionReceiver)) return receivers;
    const destination = await this.store.getDestination(sourceId, 'webhooks');
    const parsed = destination === undefined ? undefined : parseWebhookSettings(destination.settings);
    if (parsed === undefined || !parsed.ok) throw new ApiError('not_found', `source ${sourceId} has no Webhooks destination to replay to`);
    if (receivers === undefined) return undefined;
    const configured = parsed.settings.webhooks.map((receiver) => receiver.url);
    return receivers.map((url, index) => {
      if (isFunctionReceiver(url)) return url;
      let normalized: string;
      try {
        normalized = new URL(url).href;
      } catch {
        normalized = url;
      }
      if (!configured.includes(normalized)) {
        throw new ApiError('unknown_receiver', `receivers[${index}]: ${JSON.stringify(url.slice(0, 200))} is not one of the destination's receivers`);
      }
      return normalized;
    });
  }

  private async requireSource(sourceId: string): Promise<void> {
    if ((await this.store.getSource(sourceId)) === undefined) {
      throw new ApiError('not_found', `no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
    }
  }
}

function stringList(value: unknown, field: string, max: number): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.length === 0 || value.length > max || !value.every((item) => typeof item === 'string' && item.length > 0 && item.length <= 2_048)) {
    throw new ApiError('invalid_request', `${field} must be a list of 1 to ${max} non-empty strings`);
  }
  return [...new Set(value as string[])];
}

export function viewReplay(replay: ReplayRecord): ReplayView {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    id: replay.id,
    sourceId: replay.sourceId,
    from: iso(replay.from),
    to: iso(replay.to),
    ...(replay.receivers !== undefined && { receivers: replay.receivers }),
    ...(replay.types !== undefined && { types: replay.types }),
    ...(replay.events !== undefined && { events: replay.events }),
    status: replay.status,
    queued: replay.queued,
    delivered: replay.delivered,
    failed: replay.failed,
    createdAt: iso(replay.createdAt),
    updatedAt: iso(replay.updatedAt),
  };
}

