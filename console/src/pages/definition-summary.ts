import type { ComputationKind } from '../api.js';

/**
 * One line saying what a computed trait or an audience computes, for the
 * lists: "count of Order Completed in the last 30d", "performed Order
 * Completed at least 2 times in the last 30d and trait plan = "pro"". The
 * definition is the one the API stored (validated and normalized); anything
 * this does not recognise is written as its JSON, so a summary never hides a
 * part of the definition.
 */
export function definitionSummary(kind: ComputationKind, definition: unknown): string {
  const text = kind === 'trait' ? traitSummary(definition) : condition(definition, true);
  return text.length > MAX_LENGTH ? `${text.slice(0, MAX_LENGTH - 1)}…` : text;
}

/** Longer summaries are cut: the editor shows the whole definition. */
const MAX_LENGTH = 300;

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
/** A name the definition holds (a property path, a key): the text itself, anything else as JSON. */
const nameOf = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

const AGGREGATIONS: Readonly<Record<string, string>> = { sum: 'sum', avg: 'average', min: 'smallest', max: 'largest' };
const TIMES: Readonly<Record<string, string>> = { '>=': 'at least', '>': 'more than', '=': 'exactly', '!=': 'not exactly', '<=': 'at most', '<': 'fewer than' };

function traitSummary(definition: unknown): string {
  if (!isObject(definition)) return JSON.stringify(definition);
  const of = events(definition);
  const property = nameOf(definition['property']);
  switch (definition['type']) {
    case 'event_counter':
      return `count of ${of}`;
    case 'aggregation':
      return `${AGGREGATIONS[String(definition['fn'])] ?? String(definition['fn'])} of ${property} over ${of}`;
    case 'most_frequent':
      return `most frequent ${property} of ${of}`;
    case 'first':
      return `first ${property} of ${of}`;
    case 'last':
      return `last ${property} of ${of}`;
    case 'unique_list':
      return `distinct values of ${property} in ${of}`;
    case 'unique_list_count':
      return `number of distinct values of ${property} in ${of}`;
    default:
      return JSON.stringify(definition);
  }
}

/** `Order Completed where revenue >= 100 in the last 30d`, `page calls`. */
function events(event: Json): string {
  const selector = event['event'];
  const which = typeof selector === 'string' ? selector : isObject(selector) ? `${String(selector['type'])} calls` : JSON.stringify(selector);
  const where = Array.isArray(event['where']) && event['where'].length > 0 ? ` where ${event['where'].map((c: unknown) => comparison(c, 'property')).join(' and ')}` : '';
  const within = typeof event['within'] === 'string' ? ` in the last ${event['within']}` : '';
  return `${which}${where}${within}`;
}

/** `plan = "pro"`, `email exists`. */
function comparison(value: unknown, nameField: 'property' | 'key'): string {
  if (!isObject(value)) return JSON.stringify(value);
  const name = nameOf(value[nameField]);
  return value['op'] === 'exists' ? `${name} exists` : `${name} ${String(value['op'])} ${JSON.stringify(value['value'])}`;
}

/** An audience condition; `top`: not inside and/or/not, so it needs no parentheses. */
function condition(value: unknown, top = false): string {
  if (!isObject(value)) return JSON.stringify(value);
  const group = (text: string): string => (top ? text : `(${text})`);
  if (isObject(value['performed'])) {
    const performed = value['performed'];
    const count = isObject(performed['count']) ? performed['count'] : {};
    const times = Number(count['value']);
    return `performed ${events({ ...performed, within: undefined })} ${TIMES[String(count['op'])] ?? String(count['op'])} ${times} ${times === 1 ? 'time' : 'times'}${typeof performed['within'] === 'string' ? ` in the last ${performed['within']}` : ''}`;
  }
  if (isObject(value['notPerformed'])) return `did not perform ${events(value['notPerformed'])}`;
  if (isObject(value['trait'])) return `trait ${comparison(value['trait'], 'key')}`;
  if (isObject(value['computedTrait'])) return `computed trait ${comparison(value['computedTrait'], 'key')}`;
  if (typeof value['inAudience'] === 'string') return `in audience ${value['inAudience']}`;
  if (typeof value['notInAudience'] === 'string') return `not in audience ${value['notInAudience']}`;
  if (Array.isArray(value['and'])) return group(value['and'].map((c: unknown) => condition(c)).join(' and '));
  if (Array.isArray(value['or'])) return group(value['or'].map((c: unknown) => condition(c)).join(' or '));
  if ('not' in value) return `not ${condition(value['not'])}`;
  return JSON.stringify(value);
}
