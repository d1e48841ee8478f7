import { closest } from './closest-name.js';
import { isJsonObject, type JsonObject } from './message.js';
import { escapeKey, OBSERVED_BOUNDS } from './observed-schema.js';
import type { TrackingPlanDefinition } from './tracking-plan.js';

/**
 * Warnings of a tracking plan's save: a required field that no recent
 * message of the source had. A typo there (`userID` for `userId`) makes
 * every message break the plan, and under `block` none is delivered while
 * ingest still answers 200; the save itself is right to take the plan (the
 * traffic may be about to change), so this only says so. Pure: the admin
 * reads what was observed and hands it here.
 */
export interface PlanWarning {
  /** The plan's part, as its errors name it: `common`, `event "Order Completed"`, `identify traits`, `group traits`. */
  readonly where: string;
  /** The required path (keys joined with `.`, as the observed schema writes paths). */
  readonly field: string;
  /** The observed path closest to it, when one is close enough to be what was meant. */
  readonly closest?: string;
  readonly message: string;
}

/** What one part of the plan is checked against: the paths recent messages had, and how many messages that was. */
export interface ObservedFields {
  readonly messages: number;
  readonly paths: ReadonlySet<string>;
}

/** What a save's warnings are made from (see `TrackingPlanAdmin.put` for what is read, and its bounds). */
export interface RecentTraffic {
  /** ISO time the recent traffic starts from, for the messages. */
  readonly since: string;
  /** Paths of whole recent messages (for `common`); undefined when none was read. */
  readonly common: ObservedFields | undefined;
  /** Observed paths of `properties` / `traits` by `${type}\0${event}` (event '' but for tracks); only events whose paths were all recorded. */
  readonly events: ReadonlyMap<string, ObservedFields>;
}

/** A required path, and the object it is required in ('' for the schema's root). */
interface RequiredPath {
  readonly path: string;
  readonly parent: string;
}

/**
 * The paths a schema requires: the `required` lists of its root and of the
 * object schemas under it through `properties`, at most
 * {@link OBSERVED_BOUNDS.depth} levels (as deep as the observed schema
 * walks). `required` inside `allOf`, `if`/`then`, `$ref`… is not followed:
 * whether it applies depends on the message.
 */
export function requiredPaths(schema: unknown, prefix = '', depth = 1): RequiredPath[] {
  if (!isJsonObject(schema) || depth > OBSERVED_BOUNDS.depth) return [];
  const found: RequiredPath[] = [];
  if (Array.isArray(schema['required'])) {
    for (const key of schema['required']) if (typeof key === 'string') found.push({ path: join(prefix, key), parent: prefix });
  }
  const properties = schema['properties'];
  if (isJsonObject(properties)) {
    for (const [key, sub] of Object.entries(properties)) found.push(...requiredPaths(sub, join(prefix, key), depth + 1));
  }
  return found;
}

function join(prefix: string, key: string): string {
  return prefix === '' ? escapeKey(key) : `${prefix}.${escapeKey(key)}`;
}

/**
 * The object paths of a message, for checking `common` against it: keys
 * joined with `.` (escaped as the observed schema escapes them), objects
 * walked to `depth` levels, at most `max` paths.
 */
export function messagePaths(message: JsonObject, depth: number, into: Set<string>, max = 1_000): void {
  const walk = (object: JsonObject, prefix: string, level: number): void => {
    for (const [key, value] of Object.entries(object)) {
      if (into.size >= max) return;
      const path = join(prefix, key);
      into.add(path);
      if (level < depth && isJsonObject(value)) walk(value, path, level + 1);
    }
  };
  walk(message, '', 1);
}

/** How deep {@link messagePaths} must walk for `common`'s required paths. */
export function commonDepth(plan: TrackingPlanDefinition): number {
  return requiredPaths(plan.common).reduce((most, r) => Math.max(most, r.path.split('.').length), 0);
}

/** The warnings of saving `plan` over a source with `recent` traffic; empty when nothing was received. */
export function planWarnings(plan: TrackingPlanDefinition, recent: RecentTraffic): PlanWarning[] {
  const warnings: PlanWarning[] = [];
  const check = (where: string, schema: unknown, observed: ObservedFields | undefined, whose: string): void => {
    // No recent traffic there: nothing to compare with (the event may not be sent yet).
    if (observed === undefined || observed.messages === 0) return;
    for (const { path, parent } of requiredPaths(schema)) {
      // A field required inside an object no message had is not checked yet: nothing to say of it.
      if (observed.paths.has(path) || (parent !== '' && !observed.paths.has(parent))) continue;
      const meant = closest(path, observed.paths);
      const of = `${observed.messages} message${observed.messages === 1 ? '' : 's'}`;
      warnings.push({
        where,
        field: path,
        ...(meant === undefined ? {} : { closest: meant }),
        message: `${where} requires "${path}", but none of the ${of} it was checked against (${whose} since ${recent.since}) had it${meant === undefined ? '' : `; did you mean "${meant}"?`} Each message without it breaks the plan.`,
      });
    }
  };
  check('common', plan.common, recent.common, 'the latest of the source');
  for (const [event, entry] of Object.entries(plan.events)) check(`event ${JSON.stringify(event)}`, entry.properties, recent.events.get(`track\u0000${event}`), 'its tracks');
  check('identify traits', plan.identify?.traits, recent.events.get('identify\u0000'), 'identify calls');
  check('group traits', plan.group?.traits, recent.events.get('group\u0000'), 'group calls');
  return warnings;
}
