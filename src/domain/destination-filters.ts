import { type Condition, ConditionError, matches, parseCondition } from './conditions.js';
import { type JsonObject, isJsonObject } from './message.js';

/**
 * Destination filters: an ordered list of rules a Webhooks destination
 * applies to each Tracking API message at routing time.
 * - `"drop"`: a message that matches `if` goes no further;
 * - `"keep"`: a message that does not match `if` goes no further;
 * - `{"dropFields": [paths]}`: the paths are removed from a matching
 *   message's body before it is signed and sent (the stored message keeps them).
 * `if` absent matches every message. A message that goes no further creates
 * no delivery and is stored as `filtered`, its reason naming the rule.
 * `delete` messages and Engage syncs are never filtered.
 */
export interface DestinationFilter {
  readonly title: string;
  readonly if?: Condition | undefined;
  readonly action: 'drop' | 'keep' | { readonly dropFields: readonly string[] };
}

export const MAX_FILTERS = 50;
const MAX_TITLE_LENGTH = 200;
const MAX_DROP_FIELDS = 50;
const PATH = /^[^.\s]+(\.[^.\s]+)*$/;

/** What the filters make of one message. */
export type FilterVerdict =
  | { readonly kind: 'pass'; readonly dropFields: readonly string[] }
  | { readonly kind: 'filtered'; readonly title: string };

const PASS: FilterVerdict = { kind: 'pass', dropFields: [] };

/** Validates untrusted filters; throws a `ConditionError` whose `field` names the one at fault. */
export function parseFilters(input: unknown, at = 'filters'): DestinationFilter[] {
  if (input === undefined || input === null) return [];
  if (!Array.isArray(input) || input.length > MAX_FILTERS) throw new ConditionError(at, `must be a list of at most ${MAX_FILTERS} filters`);
  return input.map((entry, index) => parseFilter(entry, `${at}[${index}]`));
}

function parseFilter(input: unknown, at: string): DestinationFilter {
  if (!isJsonObject(input)) throw new ConditionError(at, 'must be an object: {title, if?, action}');
  for (const key of Object.keys(input)) {
    if (key !== 'title' && key !== 'if' && key !== 'action') throw new ConditionError(`${at}.${key.slice(0, 60)}`, 'is not a filter field; allowed: title, if, action');
  }
  const title = input['title'];
  if (typeof title !== 'string' || title.trim() === '' || title.length > MAX_TITLE_LENGTH) {
    throw new ConditionError(`${at}.title`, `must be a non-empty string of at most ${MAX_TITLE_LENGTH} characters`);
  }
  const condition = input['if'] === undefined ? undefined : parseCondition(input['if'], `${at}.if`);
  const action = input['action'];
  if (action === 'drop' || action === 'keep') return { title, if: condition, action };
  if (isJsonObject(action) && Object.keys(action).length === 1 && Array.isArray(action['dropFields'])) {
    const paths = action['dropFields'];
    if (paths.length === 0 || paths.length > MAX_DROP_FIELDS) throw new ConditionError(`${at}.action.dropFields`, `must list 1 to ${MAX_DROP_FIELDS} paths`);
    paths.forEach((path, index) => {
      if (typeof path !== 'string' || path.length > 200 || !PATH.test(path)) {
        throw new ConditionError(`${at}.action.dropFields[${index}]`, 'must be a dotted path of the message, e.g. "context.ip"');
      }
    });
    return { title, if: condition, action: { dropFields: paths as string[] } };
  }
  throw new ConditionError(`${at}.action`, 'must be "drop", "keep" or {"dropFields": [paths]}');
}

/** Applies the filters in order to one message. */
export function applyFilters(filters: readonly DestinationFilter[], message: unknown): FilterVerdict {
  if (filters.length === 0) return PASS;
  const dropFields: string[] = [];
  for (const filter of filters) {
    const hit = filter.if === undefined || matches(filter.if, message);
    if (filter.action === 'drop') {
      if (hit) return { kind: 'filtered', title: filter.title };
    } else if (filter.action === 'keep') {
      if (!hit) return { kind: 'filtered', title: filter.title };
    } else if (hit) {
      dropFields.push(...filter.action.dropFields);
    }
  }
  return dropFields.length === 0 ? PASS : { kind: 'pass', dropFields };
}

/**
 * The paths that the `dropFields` filters matching `message` remove, as
 * delivery applies them (with the filters as they are when it sends).
 */
export function fieldsToDrop(filters: readonly DestinationFilter[], message: unknown): string[] {
  const paths: string[] = [];
  for (const filter of filters) {
    if (typeof filter.action === 'object' && (filter.if === undefined || matches(filter.if, message))) paths.push(...filter.action.dropFields);
  }
  return paths;
}

/** Whether any filter removes fields, i.e. whether delivery needs to look at the body at all. */
export function dropsFields(filters: readonly DestinationFilter[]): boolean {
  return filters.some((filter) => typeof filter.action === 'object');
}

/** Removes the paths from a message object, in place. */
export function removePaths(message: JsonObject, paths: readonly string[]): void {
  for (const path of paths) {
    const keys = path.split('.');
    let parent: unknown = message;
    for (const key of keys.slice(0, -1)) {
      parent = isJsonObject(parent) && Object.hasOwn(parent, key) ? parent[key] : undefined;
    }
    if (isJsonObject(parent)) delete parent[keys[keys.length - 1]!];
  }
}

/**
 * `body`, a message's JSON, without the paths of the `dropFields` filters
 * that match it: `body` itself when no filter removes fields (the common
 * case, not parsed), when none matches, or when the message is exempt.
 */
export function withoutDroppedFields(body: string, filters: readonly DestinationFilter[]): string {
  if (!dropsFields(filters)) return body;
  let message: unknown;
  try {
    message = JSON.parse(body);
  } catch {
    return body; // not JSON: whoever reads it says so
  }
  if (!isJsonObject(message) || isExemptFromFilters(message)) return body;
  const paths = fieldsToDrop(filters, message);
  if (paths.length === 0) return body;
  removePaths(message, paths);
  return JSON.stringify(message);
}

/** Messages filters never apply to: deletion notices and Engage's computed-trait and audience syncs. */
export function isExemptFromFilters(message: JsonObject): boolean {
  if (message['type'] === 'delete') return true;
  const context = message['context'];
  return isJsonObject(context) && isJsonObject(context['personas']) && typeof context['personas']['computation_class'] === 'string';
}
