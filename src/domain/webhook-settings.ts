import { ConditionError } from './conditions.js';
import { type DestinationFilter, parseFilters } from './destination-filters.js';
import { type JsonObject, isJsonObject } from './message.js';
import { type StandardWebhooksSettings, parseStandardWebhooks } from './standard-webhooks.js';

/**
 * Settings of a source's Webhooks destination, as stored and as the admin API
 * takes them: `{webhooks: [{url, headers}], sharedSecret?}`. The address
 * check (private receivers) needs DNS and lives with the delivery guard.
 */
export interface WebhookSettings {
  readonly webhooks: readonly WebhookReceiver[];
  /** HMAC-SHA1 key of the `X-Signature` header; absent means unsigned. */
  readonly sharedSecret?: string | undefined;
  /** Standard Webhooks signatures (`webhook-id`, `webhook-timestamp`, `webhook-signature`); absent means off. */
  readonly standardWebhooks?: StandardWebhooksSettings | undefined;
  /**
   * Destination filters, in order. The admin API shows them beside `settings`
   * (`filters`); they are stored with the settings so that one record holds
   * everything the destination applies.
   */
  readonly filters?: readonly DestinationFilter[] | undefined;
  /** The transformation run on each message before its delivery exists (no version: the latest). */
  readonly transformation?: TransformationRef | undefined;
  /**
   * `user`: each key's (userId, else anonymousId) messages go to each receiver
   * one at a time, in processing order (see docs/architecture.md, "Ordered
   * delivery"). Absent means `none`. With a transformation, its outputs keep
   * the order (a split's parts in turn, a drop passes its place on).
   */
  readonly ordering?: WebhookOrdering | undefined;
}

export interface TransformationRef {
  readonly id: string;
  readonly version?: number | undefined;
}

export type WebhookOrdering = 'none' | 'user';

export interface WebhookReceiver {
  /** Normalized (`URL.href`); also the receiver's identity in a delivery's retry list. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** At most this many POSTs in any sliding second; absent means no cap. */
  readonly maxRequestsPerSecond?: number | undefined;
}

export const MAX_REQUESTS_PER_SECOND = 10_000;

export const MAX_RECEIVERS = 5;
const MAX_URL_LENGTH = 2_048;
const MAX_HEADERS = 20;
const MAX_HEADER_VALUE_LENGTH = 4_096;
const MAX_SECRET_LENGTH = 1_024;

/** RFC 9110 token: the characters a header name may use. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/;
/** Visible ASCII, space, tab and obs-text; no CR, LF or NUL (header injection). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Headers a receiver's static headers may not set: the ones the sender owns
 * (the body's framing and type, the signature, the User-Agent) and hop-by-hop
 * ones that would change the connection rather than describe the message.
 */
export const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'user-agent',
  'x-signature',
  'x-switchyard-replay',
]);

/** Headers Switchyard owns when Standard Webhooks signatures are on. */
const STANDARD_WEBHOOKS_HEADERS: ReadonlySet<string> = new Set(['webhook-id', 'webhook-timestamp', 'webhook-signature']);

export type SettingsCheck =
  | { readonly ok: true; readonly settings: WebhookSettings }
  | { readonly ok: false; readonly problem: string };

/**
 * A Webhooks destination as the hot paths use it: its settings parsed once,
 * when `SourceDirectory` loads the config, rather than by each delivery or
 * route. Invalid settings stay here as their problem, for delivery to report.
 */
export interface WebhookDestination {
  readonly enabled: boolean;
  readonly check: SettingsCheck;
}

export function webhookDestination(record: { readonly enabled: boolean; readonly settings: unknown }): WebhookDestination {
  return { enabled: record.enabled, check: parseWebhookSettings(record.settings) };
}

/** Whether stored settings order deliveries per user (`ordering: "user"`). */
export function ordersPerUser(settings: unknown): boolean {
  const check = parseWebhookSettings(settings);
  return check.ok && check.settings.ordering === 'user';
}

/** Validates untrusted settings; the problem names the field that is wrong. */
export function parseWebhookSettings(input: unknown): SettingsCheck {
  if (!isJsonObject(input)) return problem('settings must be an object with a "webhooks" array');
  for (const key of Object.keys(input)) {
    if (key !== 'webhooks' && key !== 'sharedSecret' && key !== 'standardWebhooks' && key !== 'filters' && key !== 'transformation' && key !== 'ordering') {
      return problem(`settings has an unknown field "${key.slice(0, 60)}"; allowed: webhooks, sharedSecret, standardWebhooks, transformation, ordering`);
    }
  }
  const list = input['webhooks'];
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_RECEIVERS) {
    const got = Array.isArray(list) ? `got ${list.length}` : 'got none';
    return problem(`settings.webhooks must list 1 to ${MAX_RECEIVERS} receivers (${got})`);
  }
  const webhooks: WebhookReceiver[] = [];
  for (const [index, entry] of list.entries()) {
    const receiver = parseReceiver(entry, `settings.webhooks[${index}]`);
    if (typeof receiver === 'string') return problem(receiver);
    if (webhooks.some((w) => w.url === receiver.url)) return problem(`settings.webhooks[${index}].url repeats ${receiver.url}`);
    webhooks.push(receiver);
  }
  const secret = input['sharedSecret'];
  if (secret !== undefined && secret !== null && typeof secret !== 'string') {
    return problem('settings.sharedSecret must be a string');
  }
  if (typeof secret === 'string' && secret.length > MAX_SECRET_LENGTH) {
    return problem(`settings.sharedSecret must be at most ${MAX_SECRET_LENGTH} characters`);
  }
  // An empty secret means "unsigned", as in Segment's settings form.
  const sharedSecret = typeof secret === 'string' && secret !== '' ? secret : undefined;
  let standardWebhooks: StandardWebhooksSettings | undefined;
  if (input['standardWebhooks'] !== undefined && input['standardWebhooks'] !== null) {
    const parsed = parseStandardWebhooks(input['standardWebhooks'], 'settings.standardWebhooks');
    if (typeof parsed === 'string') return problem(parsed);
    standardWebhooks = parsed;
    for (const [index, receiver] of webhooks.entries()) {
      const owned = Object.keys(receiver.headers).find((name) => STANDARD_WEBHOOKS_HEADERS.has(name.toLowerCase()));
      if (owned !== undefined) {
        return problem(`settings.webhooks[${index}].headers: "${owned}" is set by Switchyard when standardWebhooks is on`);
      }
    }
  }
  const ordering = input['ordering'];
  if (ordering !== undefined && ordering !== null && ordering !== 'none' && ordering !== 'user') {
    return problem('settings.ordering must be "none" or "user"');
  }
  let filters: DestinationFilter[] = [];
  try {
    filters = parseFilters(input['filters']);
  } catch (error) {
    if (error instanceof ConditionError) return problem(error.message);
    throw error;
  }
  let transformation: TransformationRef | undefined;
  if (input['transformation'] !== undefined && input['transformation'] !== null) {
    const parsed = parseTransformationRef(input['transformation']);
    if (typeof parsed === 'string') return problem(parsed);
    transformation = parsed;
  }
  return {
    ok: true,
    settings: {
      webhooks,
      ...(transformation !== undefined && { transformation }),
      ...(sharedSecret !== undefined && { sharedSecret }),
      ...(standardWebhooks !== undefined && { standardWebhooks }),
      ...(filters.length > 0 && { filters }),
      ...(ordering === 'user' && { ordering: 'user' as const }),
    },
  };
}

function parseTransformationRef(value: unknown): TransformationRef | string {
  const at = 'settings.transformation';
  if (!isJsonObject(value)) return `${at} must be an object {"id": "…", "version"?: N}`;
  for (const key of Object.keys(value)) {
    if (key !== 'id' && key !== 'version') return `${at} has an unknown field "${key.slice(0, 60)}"; allowed: id, version`;
  }
  const id = value['id'];
  if (typeof id !== 'string' || id === '' || id.length > 100) return `${at}.id must be a transformation id`;
  const version = value['version'];
  if (version === undefined || version === null) return { id };
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) return `${at}.version must be a version number (1, 2, …)`;
  return { id, version };
}

function parseReceiver(entry: unknown, at: string): WebhookReceiver | string {
  if (!isJsonObject(entry)) return `${at} must be an object with a "url"`;
  for (const key of Object.keys(entry)) {
    if (key !== 'url' && key !== 'headers' && key !== 'maxRequestsPerSecond') {
      return `${at} has an unknown field "${key.slice(0, 60)}"; allowed: url, headers, maxRequestsPerSecond`;
    }
  }
  const url = parseReceiverUrl(entry['url'], `${at}.url`);
  if (typeof url !== 'object') return url;
  const headers = parseHeaders(entry['headers'], `${at}.headers`);
  if (typeof headers === 'string') return headers;
  const cap = entry['maxRequestsPerSecond'];
  if (cap === undefined || cap === null) return { url: url.href, headers };
  if (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 1 || cap > MAX_REQUESTS_PER_SECOND) {
    return `${at}.maxRequestsPerSecond must be an integer from 1 to ${MAX_REQUESTS_PER_SECOND}`;
  }
  return { url: url.href, headers, maxRequestsPerSecond: cap };
}

function parseReceiverUrl(value: unknown, at: string): URL | string {
  if (typeof value !== 'string' || value === '') return `${at} must be a full http:// or https:// URL`;
  if (value.length > MAX_URL_LENGTH) return `${at} is longer than ${MAX_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${at} is not a valid URL: ${JSON.stringify(value.slice(0, 100))}`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `${at} must use http or https, not ${url.protocol.slice(0, -1).slice(0, 20)}`;
  }
  if (url.username !== '' || url.password !== '') {
    return `${at} must not carry credentials; send them as a static header (e.g. Authorization)`;
  }
  if (url.hostname === '') return `${at} has no host`;
  // Nothing listens on port 0: every delivery would fail and be retried for the whole retry window.
  if (url.port === '0') return `${at} has port 0, which no receiver can listen on`;
  if (url.hash !== '') return `${at} must not have a #fragment (receivers never see it)`;
  return url;
}

function parseHeaders(value: unknown, at: string): Record<string, string> | string {
  if (value === undefined || value === null) return {};
  if (!isJsonObject(value)) return `${at} must be an object of header names to string values`;
  const entries = Object.entries(value);
  if (entries.length > MAX_HEADERS) return `${at} has more than ${MAX_HEADERS} headers`;
  const headers: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [name, headerValue] of entries) {
    const shown = JSON.stringify(name.slice(0, 60));
    // "__proto__" is a valid token, but as a key of a plain object it would be lost.
    if (!HEADER_NAME.test(name) || name === '__proto__') return `${at}: ${shown} is not a valid HTTP header name`;
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower)) return `${at}: ${shown} is set by Switchyard and cannot be a static header`;
    if (seen.has(lower)) return `${at}: ${shown} is given twice`;
    seen.add(lower);
    if (typeof headerValue !== 'string') return `${at}.${name} must be a string`;
    if (headerValue.length > MAX_HEADER_VALUE_LENGTH) return `${at}.${name} is longer than ${MAX_HEADER_VALUE_LENGTH} characters`;
    if (!HEADER_VALUE.test(headerValue)) return `${at}.${name} holds characters a header value cannot (control characters or line breaks)`;
    headers[name] = headerValue;
  }
  return headers;
}

function problem(text: string): SettingsCheck {
  return { ok: false, problem: text };
}

/** What a read shows instead of a credential-looking static header's value; sending it back keeps the stored value. */
export const MASKED_HEADER = '********';

/** A static header whose name looks like it carries a credential (`Authorization`, `X-Api-Key`, `Cookie`, …). */
const SECRET_HEADER = /auth|key|secret|token|password|cookie|signature|credential/i;

export function isSecretHeader(name: string): boolean {
  return SECRET_HEADER.test(name);
}

/** The receivers as a read shows them: each credential-looking static header's value masked. */
export function maskReceivers(webhooks: readonly WebhookReceiver[]): WebhookReceiver[] {
  return webhooks.map((receiver) => {
    const names = Object.keys(receiver.headers);
    if (!names.some(isSecretHeader)) return receiver;
    const headers: Record<string, string> = {};
    for (const name of names) headers[name] = isSecretHeader(name) ? MASKED_HEADER : receiver.headers[name]!;
    return { ...receiver, headers };
  });
}

/**
 * The receivers of a PUT (as sent, not yet checked) with every
 * credential-looking header that carries the mask given back the value
 * stored for that header of the receiver with the same URL: a read, edited
 * and sent back, keeps its credentials. A string is the problem when a mask
 * has no stored value to keep (a new receiver, a changed URL or a new
 * header): the value must be sent.
 */
export function keepMaskedHeaders(sent: unknown, stored: readonly WebhookReceiver[]): { readonly ok: true; readonly webhooks: unknown } | { readonly ok: false; readonly problem: string } {
  if (!Array.isArray(sent)) return { ok: true, webhooks: sent };
  const byUrl = new Map(stored.map((receiver) => [receiver.url, receiver]));
  let problem: string | undefined;
  const kept = sent.map((entry: unknown, index) => {
    if (problem !== undefined || !isJsonObject(entry) || !isJsonObject(entry['headers'])) return entry;
    const sentHeaders = entry['headers'];
    const masked = Object.keys(sentHeaders).filter((name) => sentHeaders[name] === MASKED_HEADER && isSecretHeader(name));
    if (masked.length === 0) return entry;
    const previous = byUrl.get(normalizedUrl(entry['url']) ?? '');
    const headers: JsonObject = { ...sentHeaders };
    for (const name of masked) {
      const value = previous === undefined ? undefined : storedHeader(previous, name);
      if (value === undefined) {
        problem = `settings.webhooks[${index}].headers: "${name.slice(0, 60)}" is the mask ${MASKED_HEADER}, but this receiver has no stored value for it to keep; send the value`;
        return entry;
      }
      headers[name] = value;
    }
    return { ...entry, headers };
  });
  return problem === undefined ? { ok: true, webhooks: kept } : { ok: false, problem };
}

function normalizedUrl(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).href;
  } catch {
    return undefined;
  }
}

/** A stored header's value by name, in any letter case (header names are case-insensitive). */
function storedHeader(receiver: WebhookReceiver, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const [stored, value] of Object.entries(receiver.headers)) if (stored.toLowerCase() === lower) return value;
  return undefined;
}
