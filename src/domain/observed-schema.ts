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

/** A period's rows as the store sums them (types OR-ed, counts added). */
export interface ObservedRows {
  readonly events: ReadonlyArray<{ type: string; event: string; count: number; pathsTruncated: boolean }>;
  readonly paths: ReadonlyArray<{ type: string; event: string; path: string; types: number; count: number }>;
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
  readonly truncated: { readonly events: boolean; readonly unrecordedMessages: number };
}

/**
 * A period's summed rows as the admin answers them: events by count
 * (at most `bounds.eventsPerSource`: days may each hold different ones),
 * each with its paths by path, at most `bounds.pathsPerEvent`.
 */
export function observedSchemaView(rows: ObservedRows, bounds: { readonly eventsPerSource: number; readonly pathsPerEvent: number } = OBSERVED_BOUNDS): ObservedSchemaView {
  let unrecorded = 0;
  const listed = rows.events.filter((e) => {
    if (e.type !== UNRECORDED_TYPE) return true;
    unrecorded += e.count;
    return false;
  });
  listed.sort((a, b) => b.count - a.count || compareText(a.type, b.type) || compareText(a.event, b.event));
  const shown = listed.slice(0, bounds.eventsPerSource);
  const byEvent = new Map<string, Array<{ path: string; types: JsonTypeName[]; count: number }>>();
  for (const p of rows.paths) {
    const key = `${p.type}\u0000${p.event}`;
    let list = byEvent.get(key);
    if (list === undefined) byEvent.set(key, (list = []));
    list.push({ path: p.path, types: typeNames(p.types), count: p.count });
  }
  const events = shown.map((e) => {
    const all = (byEvent.get(`${e.type}\u0000${e.event}`) ?? []).sort((a, b) => compareText(a.path, b.path));
    return {
      type: e.type,
      event: e.type === 'track' ? e.event : null,
      count: e.count,
      in: observedMember(e.type) ?? null,
      paths: all.slice(0, bounds.pathsPerEvent),
      pathsTruncated: e.pathsTruncated || all.length > bounds.pathsPerEvent,
    };
  });
  return { events, truncated: { events: unrecorded > 0 || listed.length > shown.length, unrecordedMessages: unrecorded } };
}
