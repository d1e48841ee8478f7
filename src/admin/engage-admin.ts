import { randomToken } from '../util/crypto.js';
import {
  type ComputationSpec,
  DefinitionError,
  EngageModel,
  MAX_PROFILE_IDENTIFIERS,
  type ProfileState,
  keyFromName,
  parseAudienceDefinition,
  parseComputedTraitDefinition,
  parseKey,
  profileTraits,
} from '../domain/engage/index.js';
import { MAX_ID_BYTES, idWithinBounds, storedId } from '../domain/normalize.js';
import { ApiError } from '../errors.js';
import type { ComputationKind, ComputationRecord, StoredMessage, Store } from '../store/store.js';
import { limitParam, refuseNul, rejectUnknownFields, requireName, requireObject } from './validate.js';

/** A computed trait or audience as the admin API and the CLI show it (times ISO-8601). */
export interface ComputationView {
  readonly id: string;
  readonly name: string;
  readonly key: string;
  readonly definition: unknown;
  readonly destinations: readonly string[];
  readonly status: ComputationRecord['status'];
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Audiences: current members. */
  readonly size?: number;
}

export interface ProfileView {
  readonly id: string;
  readonly identifiers: readonly string[];
  readonly traits: Record<string, unknown>;
  readonly computedTraits: Record<string, unknown>;
  readonly audiences: readonly string[];
  /** When `identifiers` is one page of more: pass it as `identifiersCursor` for the next. */
  readonly identifiersCursor?: string;
}

export interface MemberView {
  readonly profileId: string;
  readonly userId?: string;
  readonly anonymousId?: string;
  readonly since: string;
}

/** Most computations a store may hold: each one is evaluated for every message. */
const MAX_COMPUTATIONS = 500;
const MAX_DESTINATIONS = 20;

export interface EngageAdminOptions {
  readonly now: () => number;
  /** Called after a definition is created or changed, so the evaluator starts at once. */
  readonly onChange?: (() => void) | undefined;
}

const PATHS: Record<ComputationKind, string> = { trait: 'computed trait', audience: 'audience' };

/** Computed traits, audiences and profiles; shared by the admin routes and the CLI. */
export class EngageAdmin {
  constructor(
    private readonly store: Store,
    private readonly options: EngageAdminOptions,
  ) {}

  async create(kind: ComputationKind, input: unknown): Promise<ComputationView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'key', 'definition', 'destinations']);
    const name = requireName(body['name']);
    const key = definitionGuard(() => (body['key'] === undefined ? keyFromName(name) : parseKey(body['key'])));
    const definition = this.parseDefinition(kind, body['definition']);
    const destinations = await this.parseDestinations(body['destinations']);
    const existing = await this.store.listComputations(undefined, false);
    if (existing.length >= MAX_COMPUTATIONS) throw new ApiError('invalid_request', `at most ${MAX_COMPUTATIONS} computed traits and audiences`);
    if (existing.some((c) => c.key === key)) throw new ApiError('key_conflict', `the key "${key}" is taken; give another "key"`);
    const id = `${kind === 'trait' ? 'ct' : 'aud'}_${randomToken(20)}`;
    this.checkCompiles([...existing.map(toSpec), { id, kind, key, definition }]);
    const now = this.options.now();
    const record: ComputationRecord = { id, kind, name, key, definition, destinations, status: 'computing', version: 1, createdAt: now, updatedAt: now };
    if (!(await this.store.insertComputation(record))) throw new ApiError('key_conflict', `the key "${key}" is taken; give another "key"`);
    this.options.onChange?.();
    return viewComputation({ ...record, size: 0 });
  }

  async list(kind: ComputationKind): Promise<{ computedTraits?: ComputationView[]; audiences?: ComputationView[] }> {
    const views = (await this.store.listComputations(kind)).map(viewComputation);
    return kind === 'trait' ? { computedTraits: views } : { audiences: views };
  }

  async get(kind: ComputationKind, id: string): Promise<ComputationView> {
    return viewComputation(await this.require(kind, id));
  }

  async update(kind: ComputationKind, id: string, input: unknown): Promise<ComputationView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['name', 'definition', 'destinations']);
    const current = await this.require(kind, id);
    const name = body['name'] === undefined ? undefined : requireName(body['name']);
    const definition = body['definition'] === undefined ? undefined : this.parseDefinition(kind, body['definition']);
    const destinations = body['destinations'] === undefined ? undefined : await this.parseDestinations(body['destinations']);
    if (definition !== undefined) {
      const others = (await this.store.listComputations(undefined, false)).filter((c) => c.id !== id);
      this.checkCompiles([...others.map(toSpec), { id, kind, key: current.key, definition }]);
    }
    const changed = JSON.stringify(definition) !== JSON.stringify(current.definition) ? definition : undefined;
    const updated = await this.store.updateComputation(id, { name, definition: changed, destinations }, this.options.now());
    if (updated === undefined) throw this.notFound(kind, id);
    this.options.onChange?.();
    return viewComputation(updated);
  }

  async remove(kind: ComputationKind, id: string): Promise<void> {
    const current = await this.require(kind, id);
    const readers = (await this.store.listComputations(undefined, false)).filter((c) => c.id !== id && readsKey(c, current.key));
    if (readers.length > 0) {
      throw new ApiError('invalid_request', `${readers.map((c) => c.key).join(', ')} read "${current.key}"; change or delete them first`);
    }
    if (!(await this.store.deleteComputation(id))) throw this.notFound(kind, id);
    this.options.onChange?.();
  }

  async members(id: string, query: { limit?: unknown; cursor?: unknown }): Promise<{ members: MemberView[]; cursor?: string }> {
    await this.require('audience', id);
    const limit = limitParam(query.limit, 100, 1_000);
    const after = typeof query.cursor === 'string' && query.cursor !== '' ? decodeMemberCursor(query.cursor) : undefined;
    const members = await this.store.listComputationMembers(id, limit, after);
    const views = members.map((m): MemberView => {
      const userId = m.identifiers.find((i) => i.startsWith('user_id:'))?.slice('user_id:'.length);
      const anonymousId = m.identifiers.find((i) => i.startsWith('anonymous_id:'))?.slice('anonymous_id:'.length);
      return {
        profileId: m.profileId,
        ...(userId === undefined ? {} : { userId }),
        ...(anonymousId === undefined ? {} : { anonymousId }),
        since: new Date(m.since).toISOString(),
      };
    });
    const last = members[members.length - 1];
    return members.length === limit && last !== undefined ? { members: views, cursor: encodeCursor(`${last.since}:${last.profileId}`) } : { members: views };
  }

  async profile(identifier: string, query: { identifiersLimit?: unknown; identifiersCursor?: unknown } = {}): Promise<ProfileView> {
    const limit = limitParam(query.identifiersLimit, IDENTIFIERS_PAGE, MAX_PROFILE_IDENTIFIERS, 'identifiersLimit');
    const cursor = query.identifiersCursor;
    const after = typeof cursor === 'string' && cursor !== '' ? decodeIdentifierCursor(cursor) : undefined;
    const record = await this.requireProfile(identifier);
    const computations = await this.store.listComputations(undefined, false);
    const model = compileQuietly(computations.map(toSpec));
    const state = JSON.parse(record.state) as ProfileState;
    const outputs = model?.evaluate(state, this.options.now()) ?? {};
    const computedTraits: Record<string, unknown> = {};
    const audiences: string[] = [];
    for (const computation of computations) {
      const value = computation.id in outputs ? outputs[computation.id] : record.outputs[computation.id];
      if (computation.kind === 'audience') {
        if (value === true) audiences.push(computation.key);
      } else if (value !== undefined) {
        computedTraits[computation.key] = value;
      }
    }
    // Identifiers are paged (sorted): a profile may hold up to MAX_PROFILE_IDENTIFIERS.
    const sorted = [...record.identifiers].sort();
    const from = after === undefined ? 0 : sortedIndexAfter(sorted, after);
    const identifiers = sorted.slice(from, from + limit);
    const more = from + limit < sorted.length;
    return {
      id: record.id,
      identifiers,
      traits: profileTraits(state),
      computedTraits,
      audiences,
      ...(more ? { identifiersCursor: encodeCursor(identifiers[identifiers.length - 1]!) } : {}),
    };
  }

  async events(identifier: string, query: { limit?: unknown }): Promise<{ events: unknown[] }> {
    const limit = limitParam(query.limit, 20, 50);
    const record = await this.requireProfile(identifier);
    const messages = await this.store.getMessagesBySeq(record.recentSeqs.slice(0, limit));
    return { events: messages.map(eventView) };
  }

  private async requireProfile(identifier: string): Promise<NonNullable<Awaited<ReturnType<Store['getProfiles']>>[number]>> {
    const stored = storedIdentifier(identifier);
    const id = (await this.store.findProfileIds([stored])).get(stored);
    const [record] = id === undefined ? [] : await this.store.getProfiles([id]);
    if (record === undefined) throw new ApiError('profile_not_found', `no profile has the identifier ${JSON.stringify(identifier.slice(0, 200))}`);
    return record;
  }

  private parseDefinition(kind: ComputationKind, json: unknown): unknown {
    return definitionGuard(() => (kind === 'trait' ? parseComputedTraitDefinition(json) : parseAudienceDefinition(json)));
  }

  private checkCompiles(specs: ComputationSpec[]): void {
    definitionGuard(() => EngageModel.compile(specs));
  }

  private async parseDestinations(value: unknown): Promise<string[]> {
    if (value === undefined) return [];
    if (!Array.isArray(value) || value.length > MAX_DESTINATIONS || !value.every((v) => typeof v === 'string' && v.length > 0 && v.length <= 200)) {
      throw new ApiError('invalid_request', `destinations must be a list of at most ${MAX_DESTINATIONS} source ids`);
    }
    const ids = [...new Set(value as string[])];
    for (const [index, sourceId] of ids.entries()) {
      refuseNul(sourceId, `destinations[${index}]`);
      if ((await this.store.getSource(sourceId)) === undefined) {
        throw new ApiError('invalid_request', `destinations[${index}]: no source with id ${JSON.stringify(sourceId.slice(0, 60))}`);
      }
    }
    return ids;
  }

  private async require(kind: ComputationKind, id: string): Promise<ComputationRecord> {
    const record = await this.store.getComputation(id);
    if (record === undefined || record.kind !== kind) throw this.notFound(kind, id);
    return record;
  }

  private notFound(kind: ComputationKind, id: string): ApiError {
    return new ApiError('not_found', `no ${PATHS[kind]} with id ${JSON.stringify(id.slice(0, 60))}`);
  }
}

/**
 * `user_id:<userId>` or `anonymous_id:<anonymousId>` as profiles store it:
 * the id bounded and named as ingest stores ids (MAX_ID_BYTES, storedId),
 * so that the id a client sent finds its profile.
 */
function storedIdentifier(identifier: string): string {
  const match = /^(user_id|anonymous_id):(.+)$/s.exec(identifier);
  if (match === null || !idWithinBounds(match[2]!)) {
    throw new ApiError('invalid_request', `the identifier must be user_id:<userId> or anonymous_id:<anonymousId>, the id of 1 to ${MAX_ID_BYTES} bytes (UTF-8)`);
  }
  return `${match[1]!}:${storedId(match[2]!)}`;
}

/** Runs a domain parse, turning its DefinitionError into the API's invalid_definition (the message names the field). */
function definitionGuard<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof DefinitionError) throw new ApiError('invalid_definition', error.message);
    throw error;
  }
}

function compileQuietly(specs: ComputationSpec[]): EngageModel | undefined {
  try {
    return EngageModel.compile(specs);
  } catch {
    return undefined;
  }
}

function readsKey(computation: ComputationRecord, key: string): boolean {
  if (computation.kind !== 'audience') return false;
  const text = JSON.stringify(computation.definition);
  return (
    text.includes(`"inAudience":${JSON.stringify(key)}`) ||
    text.includes(`"notInAudience":${JSON.stringify(key)}`) ||
    text.includes(`"computedTrait":{"key":${JSON.stringify(key)}`)
  );
}

function toSpec(c: { id: string; kind: ComputationKind; key: string; definition: unknown }): ComputationSpec {
  return { id: c.id, kind: c.kind, key: c.key, definition: c.definition };
}

/** Identifiers a profile answer lists by default (`identifiersLimit`, at most MAX_PROFILE_IDENTIFIERS). */
const IDENTIFIERS_PAGE = 100;

/** The index of the first of `sorted` after `after`. */
function sortedIndexAfter(sorted: readonly string[], after: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! <= after) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** An identifier cursor: the last identifier of the previous page (identifiers are at most about 1,000 characters). */
function decodeIdentifierCursor(cursor: string): string {
  if (cursor.length > 2_000 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new ApiError('invalid_request', 'identifiersCursor is not one this API gave');
  return Buffer.from(cursor, 'base64url').toString();
}

const encodeCursor = (position: string): string => Buffer.from(position).toString('base64url');
function decodeCursor(cursor: string): string {
  if (cursor.length > 400 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new ApiError('invalid_request', 'cursor is not one this API gave');
  return Buffer.from(cursor, 'base64url').toString();
}

/** A members cursor: the last member's join time and profile id (members are listed in join order). */
function decodeMemberCursor(cursor: string): { since: number; profileId: string } {
  const position = /^(\d{1,16}):(.+)$/s.exec(decodeCursor(cursor));
  if (position === null) throw new ApiError('invalid_request', 'cursor is not one this API gave');
  return { since: Number(position[1]), profileId: position[2]! };
}

export function viewComputation(c: ComputationRecord): ComputationView {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    id: c.id,
    name: c.name,
    key: c.key,
    definition: c.definition,
    destinations: c.destinations,
    status: c.status,
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
    ...(c.kind === 'audience' ? { size: c.size ?? 0 } : {}),
  };
}

function eventView(message: StoredMessage): unknown {
  let body: unknown;
  try {
    body = JSON.parse(message.body);
  } catch {
    body = message.body;
  }
  return { seq: message.seq, sourceId: message.sourceId, type: message.type, receivedAt: new Date(message.receivedAt).toISOString(), message: body };
}
