import { type JsonObject, isJsonObject } from './message.js';

/**
 * The rules of a function destination's own fields, pure: its name (the
 * `integrations` key), its settings (the object the handlers get as their
 * second argument) and which settings are secret-looking, masked on read.
 */

/** Most function destinations one source may have. */
export const MAX_FUNCTIONS_PER_SOURCE = 5;

/** Largest settings object, as compact JSON (UTF-8 bytes). */
export const MAX_SETTINGS_BYTES = 64 * 1024;

/** What a read shows instead of a secret-looking setting; sending it back keeps the stored value. */
export const MASKED_SETTING = '********';

/** A setting whose key matches is secret-looking: masked on read, and its value never shown in attempt logs. */
const SECRET_KEY = /key|secret|token|password|auth/i;

/** Names that already mean something in `integrations`. */
const RESERVED_NAMES = new Set(['All', 'Webhooks']);

export function isSecretSettingKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** Why a name cannot be a function destination's name, or undefined when it can. */
export function functionNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || name.trim() === '' || name.length > 100) return 'name must be a non-empty string of at most 100 characters';
  if (name !== name.trim()) return 'name must not start or end with spaces (it is the integrations key, matched exactly)';
  if (name.includes('\u0000')) return 'name must not hold U+0000';
  if (RESERVED_NAMES.has(name)) return `name "${name}" is reserved in integrations; choose another`;
  return undefined;
}

/** Why settings are not acceptable, or undefined. Top-level values may be any JSON. */
export function settingsProblem(settings: unknown): string | undefined {
  if (!isJsonObject(settings)) return 'settings must be a JSON object';
  if (Buffer.byteLength(JSON.stringify(settings)) > MAX_SETTINGS_BYTES) return `settings must be at most ${MAX_SETTINGS_BYTES / 1024} KB as JSON`;
  return undefined;
}

/** The settings as a read shows them: each secret-looking top-level value (that is set) masked. */
export function maskSettings(settings: JsonObject): JsonObject {
  const shown: JsonObject = {};
  for (const [key, value] of Object.entries(settings)) {
    shown[key] = isSecretSettingKey(key) && value !== null && value !== '' ? MASKED_SETTING : value;
  }
  return shown;
}

/**
 * The settings to store for an update: the new ones, with every
 * secret-looking key that was sent masked, or not sent at all, keeping its
 * stored value (a read, edited and sent back, must not wipe secrets; to
 * remove one, send `null`, which removes the key).
 */
export function mergeSettings(previous: JsonObject, sent: JsonObject): JsonObject {
  const merged: JsonObject = {};
  for (const [key, value] of Object.entries(sent)) {
    if (isSecretSettingKey(key) && value === MASKED_SETTING) {
      if (previous[key] !== undefined) merged[key] = previous[key]!;
      continue;
    }
    if (value === null && isSecretSettingKey(key)) continue;
    merged[key] = value;
  }
  for (const [key, value] of Object.entries(previous)) {
    if (isSecretSettingKey(key) && !(key in sent)) merged[key] = value;
  }
  return merged;
}

/**
 * The secret-looking string values of the settings (at least 4 characters),
 * longest first, each with the spellings it takes on the way to the attempt
 * log: JSON-escaped (a logged object), percent-encoded and as a parsed URL's
 * `href` (a fetched URL). What the attempt log replaces with the mask
 * wherever the function's logs, errors or fetched URLs contain them. A
 * secret-looking key whose value is an object or an array (read back as
 * one mask) has each of its strings, at any depth, taken as a secret.
 */
export function secretValues(settings: JsonObject): string[] {
  const found = new Set<string>();
  for (const [key, value] of Object.entries(settings)) {
    if (!isSecretSettingKey(key)) continue;
    for (const secret of stringsIn(value)) {
      if (secret.length < 4) continue;
      for (const spelling of spellings(secret)) if (spelling.length >= 4) found.add(spelling);
    }
  }
  return [...found].sort((a, b) => b.length - a.length);
}

/** Every string in a JSON value, at any depth (iterative: settings are at most 64 KB, but may nest deep). */
function stringsIn(value: unknown): string[] {
  const out: string[] = [];
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === 'string') out.push(next);
    else if (Array.isArray(next)) pending.push(...(next as unknown[]));
    else if (isJsonObject(next)) pending.push(...Object.values(next));
  }
  return out;
}

function spellings(secret: string): string[] {
  const out = [secret, JSON.stringify(secret).slice(1, -1)];
  try {
    out.push(encodeURIComponent(secret));
  } catch {
    // A lone surrogate has no percent-encoding.
  }
  // As the URL parser writes it in a path, in a query, and as a whole URL.
  const path = parsed(`http://h/${secret}`);
  if (path !== undefined) out.push(path.pathname.slice(1));
  const query = parsed(`http://h/?${secret}`);
  if (query !== undefined) out.push(query.search.slice(1));
  const whole = parsed(secret);
  if (whole !== undefined) out.push(whole.href, whole.href.replace(/\/$/, ''));
  return out;
}

function parsed(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** `text` with each of `secrets` replaced by the mask, in any letter case (a URL's host is lowercased). */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    out = out.replace(new RegExp(secret.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'giu'), MASKED_SETTING);
  }
  return out;
}
