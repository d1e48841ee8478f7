import { type CallType, isJsonObject, type JsonObject } from './message.js';
import { storedId } from './normalize.js';

/**
 * The observed schema of a source (`GET /sources/:id/schema`): what it has
 * actually received, per call type and event name, with each property (or
 * trait) path, the JSON types seen at it and how many messages had it. Kept
 * incrementally by processing, per UTC day, at a bounded cost: this module
 * takes a message's shape (bounded walk), adds up a processing batch's
 * shapes in memory and decides, against what the store already holds, what
 * the batch may add without passing the caps. Pure: no I/O.
 */

export const OBSERVED_BOUNDS = Object.freeze({
  /** Distinct (call type, event name) recorded per source and day; past it a message's shape is counted as unrecorded. */
  eventsPerSource: 2_000,
  /** Distinct paths recorded per (source, day, call type, event); past it the event says `pathsTruncated`. */
  pathsPerEvent: 200,
  /** Levels walked below `properties` / `traits` (a top-level property is level 1). */
  depth: 6,
  /** Items of an array looked at (their shapes merge into `path[]`). */
  arrayItems: 10,
  /** Paths taken from one message; the walk stops there (and the event says `pathsTruncated`). */
  pathsPerMessage: 200,
  /** A longer path (escaped) is skipped, and the event says `pathsTruncated`. */
  pathChars: 300,
  /** Event names are recorded cut to this length. */
  eventChars: 200,
  /** Day buckets kept; older ones are pruned. */
  retentionDays: 30,
});

export const DAY_MS = 86_400_000;

export function dayOf(at: number): number {
  return Math.floor(at / DAY_MS) * DAY_MS;
}

/** JSON types, one bit each (stored as an integer, OR-ed across messages). `integer`: a number without a fraction. */
export const JSON_TYPES = ['string', 'integer', 'number', 'boolean', 'object', 'array', 'null'] as const;
export type JsonTypeName = (typeof JSON_TYPES)[number];

function typeBit(value: unknown): number {
  if (typeof value === 'string') return 1;
  if (typeof value === 'number') return Number.isInteger(value) ? 2 : 4;
  if (typeof value === 'boolean') return 8;
  if (value === null) return 64;
  if (Array.isArray(value)) return 32;
  return 16;
}

export function typeNames(bits: number): JsonTypeName[] {
  return JSON_TYPES.filter((_, i) => (bits & (1 << i)) !== 0);
}

/** Where a call type's described data sits: track, page and screen have `properties`, identify and group `traits`; alias none. */
export function observedMember(type: string): 'properties' | 'traits' | undefined {
  if (type === 'track' || type === 'page' || type === 'screen') return 'properties';
  if (type === 'identify' || type === 'group') return 'traits';
  return undefined;
}

/** One message's shape: its call type, event name (tracks; '' otherwise), and the paths of its properties / traits with their type bits. */
export interface MessageShape {
  readonly type: CallType;
  readonly event: string;
  readonly paths: readonly string[];
  readonly types: readonly number[];
  /** A walk bound left paths out. */
  readonly cut: boolean;
}

/**
 * A key as a path segment: `.`, `[`, `]` and `\` are escaped with `\`, so a
 * path splits back into its keys. U+0000 becomes U+FFFD, as in an id
 * (storedId): a path is a PostgreSQL column.
 */
export function escapeKey(key: string): string {
  return storedId(/[.[\]\\]/.test(key) ? key.replace(/[.[\]\\]/g, '\\$&') : key);
}

/** A path's segments: keys, and `[]` for "the items of the array before" (`items[].sku` → items, [], sku). */
export function splitPath(path: string): string[] {
  const segments: string[] = [];
  let key = '';
  // A key is under way (it may be empty: `a..b`); none right after `[]`.
  let pending = true;
  for (let i = 0; i < path.length; i++) {
    const c = path[i]!;
    if (c === '\\' && i + 1 < path.length) {
      key += path[++i];
      pending = true;
    } else if (c === '.') {
      if (pending) segments.push(key);
      key = '';
      pending = true;
    } else if (c === '[' && path[i + 1] === ']') {
      if (pending) segments.push(key);
      segments.push('[]');
      key = '';
      pending = false;
      i++;
    } else {
      key += c;
      pending = true;
    }
  }
  if (pending) segments.push(key);
  return segments;
}

/**
 * The shape of a message as received (before a tracking plan omits
 * anything). The walk is bounded: {@link OBSERVED_BOUNDS.depth} levels, the
 * first {@link OBSERVED_BOUNDS.arrayItems} items of an array, at most
 * {@link OBSERVED_BOUNDS.pathsPerMessage} paths, each at most
 * {@link OBSERVED_BOUNDS.pathChars} characters; `cut` says a bound left
 * something out. Keys are walked in the message's order.
 */
export function shapeOf(message: JsonObject, type: CallType): MessageShape {
  // U+0000 as in escapeKey: the event name is a PostgreSQL column.
  const event = type === 'track' && typeof message['event'] === 'string' ? storedId(message['event'].slice(0, OBSERVED_BOUNDS.eventChars)) : '';
  const member = observedMember(type);
  const index = new Map<string, number>();
  const paths: string[] = [];
  const types: number[] = [];
  let cut = false;
  const record = (path: string, bit: number): boolean => {
    const at = index.get(path);
    if (at !== undefined) {
      types[at]! |= bit;
      return true;
    }
    if (paths.length >= OBSERVED_BOUNDS.pathsPerMessage || path.length > OBSERVED_BOUNDS.pathChars) {
      cut = true;
      return false;
    }
    index.set(path, paths.length);
    paths.push(path);
    types.push(bit);
    return true;
  };
  const walkObject = (object: JsonObject, prefix: string, depth: number): void => {
    if (depth > OBSERVED_BOUNDS.depth) {
      if (Object.keys(object).length > 0) cut = true;
      return;
    }
    for (const key in object) {
      const value = object[key];
      if (value === undefined) continue;
      walkValue(value, prefix === '' ? escapeKey(key) : `${prefix}.${escapeKey(key)}`, depth);
      if (cut && paths.length >= OBSERVED_BOUNDS.pathsPerMessage) return;
    }
  };
  const walkValue = (value: unknown, path: string, depth: number): void => {
    if (!record(path, typeBit(value))) return;
    if (Array.isArray(value)) {
      const items = Math.min(value.length, OBSERVED_BOUNDS.arrayItems);
      if (depth >= OBSERVED_BOUNDS.depth) {
        if (value.length > 0) cut = true;
        return;
      }
      for (let i = 0; i < items; i++) walkValue(value[i], `${path}[]`, depth + 1);
    } else if (isJsonObject(value)) walkObject(value, path, depth + 1);
  };
  const data = member === undefined ? undefined : message[member];
  if (isJsonObject(data)) walkObject(data, '', 1);
  return { type, event, paths, types, cut };
}

// --- a processing batch, added up --------------------------------------------------

export interface ObservedEventCount {
  readonly sourceId: string;
  readonly day: number;
  readonly type: string;
  readonly event: string;
  readonly count: number;
  readonly pathsTruncated: boolean;
}

export interface ObservedPathCount {
  readonly sourceId: string;
  readonly day: number;
  readonly type: string;
  readonly event: string;
  readonly path: string;
  readonly types: number;
  readonly count: number;
}

/** The key of an event bucket; NUL cannot appear in a source id or call type. */
export function eventKey(sourceId: string, day: number, type: string, event: string): string {
  return `${sourceId}\u0000${day}\u0000${type}\u0000${event}`;
}

export function pathKey(sourceId: string, day: number, type: string, event: string, path: string): string {
  return `${eventKey(sourceId, day, type, event)}\u0000${path}`;
}

interface MutableEvent {
  sourceId: string;
  day: number;
  type: string;
  event: string;
  count: number;
  pathsTruncated: boolean;
  paths: Map<string, { types: number; count: number }>;
}

/** A processing batch's shapes, added up in memory: one count per (source, day, type, event) and per path. */
export class ObservedBatch {
  private readonly events = new Map<string, MutableEvent>();

  get isEmpty(): boolean {
    return this.events.size === 0;
  }

  add(sourceId: string, receivedAt: number, shape: MessageShape): void {
    const day = dayOf(receivedAt);
    const key = eventKey(sourceId, day, shape.type, shape.event);
    let entry = this.events.get(key);
    if (entry === undefined) {
      entry = { sourceId, day, type: shape.type, event: shape.event, count: 0, pathsTruncated: false, paths: new Map() };
      this.events.set(key, entry);
    }
    entry.count++;
    if (shape.cut) entry.pathsTruncated = true;
    for (let i = 0; i < shape.paths.length; i++) {
      const path = shape.paths[i]!;
      const seen = entry.paths.get(path);
      if (seen === undefined) entry.paths.set(path, { types: shape.types[i]!, count: 1 });
      else {
        seen.types |= shape.types[i]!;
        seen.count++;
      }
    }
  }

  /** The event buckets' keys, sorted (what the store looks up before {@link capObserved}). */
  eventKeys(): Array<{ sourceId: string; day: number; type: string; event: string }> {
    return [...this.events.values()].map(({ sourceId, day, type, event }) => ({ sourceId, day, type, event })).sort(compareEvents);
  }

  /** The path buckets' keys, sorted. */
  pathKeys(): Array<{ sourceId: string; day: number; type: string; event: string; path: string }> {
    const keys: Array<{ sourceId: string; day: number; type: string; event: string; path: string }> = [];
    for (const e of this.events.values()) for (const path of e.paths.keys()) keys.push({ sourceId: e.sourceId, day: e.day, type: e.type, event: e.event, path });
    return keys.sort(comparePaths);
  }

  /** For {@link capObserved}. */
  entries(): Iterable<MutableEvent> {
    return this.events.values();
  }
}

/** What the store already holds for a batch's buckets. */
export interface ObservedExisting {
  /** Recorded events per (source, day): `${sourceId}\0${day}` → how many. */
  readonly eventsPerDay: ReadonlyMap<string, number>;
  /** {@link eventKey}s of the batch's events already recorded. */
  readonly knownEvents: ReadonlySet<string>;
  /** Recorded paths per {@link eventKey} (of the batch's events). */
  readonly pathsPerEvent: ReadonlyMap<string, number>;
  /** {@link pathKey}s of the batch's paths already recorded. */
  readonly knownPaths: ReadonlySet<string>;
}

/** What a batch writes: upserts (count added), sorted by key so that concurrent writers lock rows in one order. */
export interface ObservedWrites {
  readonly events: ObservedEventCount[];
  readonly paths: ObservedPathCount[];
  /** Messages whose event was not recorded (the day was at the cap), per (source, day): counted on the `''`/`''` row. */
  readonly unrecorded: Array<{ sourceId: string; day: number; count: number }>;
}

/**
 * Decides what a batch adds without passing the caps: an event already
 * recorded adds to its count; a new one is recorded while its source's day
 * holds fewer than `bounds.eventsPerSource` (biggest counts first), else its
 * messages count as unrecorded. The same for paths per event, past which
 * the event says `pathsTruncated`.
 */
export function capObserved(batch: ObservedBatch, existing: ObservedExisting, bounds: { readonly eventsPerSource: number; readonly pathsPerEvent: number } = OBSERVED_BOUNDS): ObservedWrites {
  const events: ObservedEventCount[] = [];
  const paths: ObservedPathCount[] = [];
  const unrecorded = new Map<string, { sourceId: string; day: number; count: number }>();
  const eventsPerDay = new Map(existing.eventsPerDay);
  const all = [...batch.entries()].sort((a, b) => b.count - a.count || compareEvents(a, b));
  for (const e of all) {
    const key = eventKey(e.sourceId, e.day, e.type, e.event);
    const dayKey = `${e.sourceId}\u0000${e.day}`;
    if (!existing.knownEvents.has(key)) {
      const held = eventsPerDay.get(dayKey) ?? 0;
      if (held >= bounds.eventsPerSource) {
        const u = unrecorded.get(dayKey) ?? { sourceId: e.sourceId, day: e.day, count: 0 };
        u.count += e.count;
        unrecorded.set(dayKey, u);
        continue;
      }
      eventsPerDay.set(dayKey, held + 1);
    }
    let pathsHeld = existing.pathsPerEvent.get(key) ?? 0;
    let truncated = e.pathsTruncated;
    const byCount = [...e.paths.entries()].sort((a, b) => b[1].count - a[1].count || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (const [path, seen] of byCount) {
      if (!existing.knownPaths.has(pathKey(e.sourceId, e.day, e.type, e.event, path))) {
        if (pathsHeld >= bounds.pathsPerEvent) {
          truncated = true;
          continue;
        }
        pathsHeld++;
      }
      paths.push({ sourceId: e.sourceId, day: e.day, type: e.type, event: e.event, path, types: seen.types, count: seen.count });
    }
    events.push({ sourceId: e.sourceId, day: e.day, type: e.type, event: e.event, count: e.count, pathsTruncated: truncated });
  }
  return { events: events.sort(compareEvents), paths: paths.sort(comparePaths), unrecorded: [...unrecorded.values()].sort(compareEvents) };
}

/** The type of the row counting a day's unrecorded messages (no call type is empty). */
export const UNRECORDED_TYPE = '';

type EventKeyed = { readonly sourceId: string; readonly day: number; readonly type?: string; readonly event?: string };

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareEvents(a: EventKeyed, b: EventKeyed): number {
  return compareText(a.sourceId, b.sourceId) || a.day - b.day || compareText(a.type ?? '', b.type ?? '') || compareText(a.event ?? '', b.event ?? '');
}

function comparePaths(a: EventKeyed & { path: string }, b: EventKeyed & { path: string }): number {
  return compareEvents(a, b) || compareText(a.path, b.path);
}

// --- the answer ----------------------------------------------------------------------

/**
 * How much one schema answer (`GET /sources/:id/schema`) holds, so that a
 * read costs the same whatever a source was sent: a page of events (biggest
 * count first) and, across them, a budget of paths. The store reads the
 * page's events first, then paths only for them, {@link SCHEMA_PAGE.eventsPerRead}
 * events at a time, until the budget is spent.
 */
export const SCHEMA_PAGE = Object.freeze({
  /** Events per page when `limit` is not given. */
  defaultEvents: 100,
  /** The largest `limit`. */
  maxEvents: 1_000,
  /** Paths in one answer, across its events; the first event always fits (it lists at most `pathsPerEvent`). */
  paths: 2_000,
  /** Events whose paths one store read takes (at most this many events' paths are read and not shown). */
  eventsPerRead: 10,
});

/**
 * How much a drafted plan (`POST …/tracking-plan/from-schema`) is made
 * from: the most frequent events, within a path budget. Plans are at most
 * 256 KB and 2,000 events, and must compile within 2 s at save: 5,000
 * paths took 2.1 s on a busy 2-CPU machine, 2,000 well under 1 s.
 */
export const DRAFT_PAGE = Object.freeze({ events: 2_000, paths: 2_000 });

/** An event as the store sums it over a period (types OR-ed, counts added). */
export interface ObservedEventRow {
  readonly type: string;
  readonly event: string;
  readonly count: number;
  readonly pathsTruncated: boolean;
}

/** A path of an event, summed over a period. */
export interface ObservedPathRow {
  readonly type: string;
  readonly event: string;
  readonly path: string;
  readonly types: number;
  readonly count: number;
}

/** Where a page starts: after this event in the answer's order (count descending, then type and event in code point order). */
export interface ObservedPosition {
  readonly count: number;
  readonly type: string;
  readonly event: string;
}

/**
 * The UTC days a period reads (day starts, ascending): those from `fromDay`
 * to `toDay` that may hold counts, from {@link OBSERVED_BOUNDS.retentionDays}
 * before today (older ones are pruned) to tomorrow (a node's clock a little
 * ahead). At most retentionDays + 2, whatever the period asked.
 */
export function observedDays(fromDay: number, toDay: number, now: number): number[] {
  const today = dayOf(now);
  const first = Math.max(fromDay, today - OBSERVED_BOUNDS.retentionDays * DAY_MS);
  const last = Math.min(toDay, today + DAY_MS);
  const days: number[] = [];
  for (let day = first; day <= last; day += DAY_MS) days.push(day);
  return days;
}

/** The opaque cursor of the page after `position`. */
export function encodeSchemaCursor(position: ObservedPosition): string {
  return Buffer.from(JSON.stringify([position.count, position.type, position.event])).toString('base64url');
}

/** The position a cursor names; undefined when it is not one {@link encodeSchemaCursor} made. */
export function decodeSchemaCursor(cursor: string): ObservedPosition | undefined {
  if (cursor.length > 2_000 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 3) return undefined;
  const [count, type, event] = value as unknown[];
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) return undefined;
  if (typeof type !== 'string' || typeof event !== 'string' || type.length > 20 || event.length > OBSERVED_BOUNDS.eventChars) return undefined;
  // Stored names never hold U+0000 (storedId), and PostgreSQL text cannot.
  if (type.includes('\u0000') || event.includes('\u0000')) return undefined;
  return { count, type, event };
}

export interface ObservedSchemaView {
  readonly events: Array<{
    type: string;
    event: string | null;
    count: number;
    in: 'properties' | 'traits' | null;
    paths: Array<{ path: string; types: JsonTypeName[]; count: number }>;
    pathsTruncated: boolean;
  }>;
  /** `events`: not every event of the period is in this answer (unrecorded past the daily cap, or on later pages). */
  readonly truncated: { readonly events: boolean; readonly unrecordedMessages: number };
  /** The cursor of the next page; absent on the last one. */
  readonly cursor?: string;
}

/**
 * Builds one bounded page of the observed schema from what the store reads
 * in steps: `candidates` are the page's events as the store sorted them
 * (count descending, then type and event), at most `limit + 1` of them (one
 * more says there is a next page); {@link next} names the events whose paths
 * to read next, {@link add} takes them (each event's first
 * `pathsPerEvent + 1` paths in path order). An event goes on the page while
 * its paths fit in the budget (the first always does); the cursor then
 * points after the last one shown. Pure: no I/O.
 */
export class ObservedSchemaPage {
  private readonly shown: ObservedSchemaView['events'] = [];
  private readonly pending: ObservedEventRow[];
  /** The store had an event after the `limit` ones. */
  private readonly more: boolean;
  private last: ObservedEventRow | undefined;
  private pathsLeft: number;
  private full = false;

  constructor(
    candidates: readonly ObservedEventRow[],
    limit: number,
    pathBudget: number,
    private readonly unrecordedMessages: number,
    private readonly bounds: { readonly pathsPerEvent: number; readonly eventsPerRead: number } = { pathsPerEvent: OBSERVED_BOUNDS.pathsPerEvent, eventsPerRead: SCHEMA_PAGE.eventsPerRead },
  ) {
    this.pending = candidates.slice(0, limit);
    this.more = candidates.length > limit;
    this.pathsLeft = pathBudget;
    this.full = this.pending.length === 0;
  }

  /** The events whose paths to read next (at most `eventsPerRead`); empty once the page is made. */
  next(): ReadonlyArray<{ type: string; event: string }> {
    if (this.full) return [];
    return this.pending.slice(0, this.bounds.eventsPerRead);
  }

  /** Takes the paths read for the events {@link next} named (any order of events; each event's paths in path order). */
  add(paths: readonly ObservedPathRow[]): void {
    const read = this.pending.splice(0, this.bounds.eventsPerRead);
    const byEvent = new Map<string, ObservedPathRow[]>();
    for (const p of paths) {
      const key = `${p.type}\u0000${p.event}`;
      let list = byEvent.get(key);
      if (list === undefined) byEvent.set(key, (list = []));
      list.push(p);
    }
    for (let i = 0; i < read.length; i++) {
      const e = read[i]!;
      const all = byEvent.get(`${e.type}\u0000${e.event}`) ?? [];
      const listed = all.slice(0, this.bounds.pathsPerEvent);
      if (this.shown.length > 0 && listed.length > this.pathsLeft) {
        // This event and the ones after it go to the next page.
        this.pending.unshift(...read.slice(i));
        this.full = true;
        return;
      }
      this.pathsLeft -= listed.length;
      this.last = e;
      this.shown.push({
        type: e.type,
        event: e.type === 'track' ? e.event : null,
        count: e.count,
        in: observedMember(e.type) ?? null,
        paths: listed.map((p) => ({ path: p.path, types: typeNames(p.types), count: p.count })),
        pathsTruncated: e.pathsTruncated || all.length > this.bounds.pathsPerEvent,
      });
    }
    if (this.pending.length === 0) this.full = true;
  }

  /** The page (once {@link next} is empty). */
  view(): ObservedSchemaView {
    const more = this.pending.length > 0 || this.more;
    const last = this.last;
    const cursor = more && last !== undefined ? encodeSchemaCursor(last) : undefined;
    return {
      events: this.shown,
      truncated: { events: this.unrecordedMessages > 0 || cursor !== undefined, unrecordedMessages: this.unrecordedMessages },
      ...(cursor === undefined ? {} : { cursor }),
    };
  }
}
