import { ApiError } from '../api.js';
import { errorText } from '../ui.js';

/** What the API shows instead of a stored secret-looking setting; sent back (or left out), it keeps the stored value. */
export const MASKED_SETTING = '********';

export interface SettingRow {
  key: string;
  value: string;
  /** Read masked: its key stays as it is, and removing the row deletes the stored value (sent as null). */
  masked: boolean;
}

/** The settings as edited: rows of text values, or JSON for any value (numbers, lists, objects). */
export interface SettingsDraft {
  mode: 'rows' | 'json';
  rows: SettingRow[];
  /** Masked keys whose rows were removed: sent as null, which deletes them (left out, they would be kept). */
  removed: string[];
  json: string;
}

/** Settings the console can tell are wrong before sending; the message starts with `settings`, so it shows beside them. */
export class LocalSettingsError extends ApiError {
  constructor(message: string) {
    super(400, 'invalid_settings', `settings ${message}`);
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The keys a read showed masked. */
export function maskedKeysOf(settings: Record<string, unknown>): Set<string> {
  return new Set(Object.entries(settings).filter(([, value]) => value === MASKED_SETTING).map(([key]) => key));
}

/** Rows when every value is text (what a form can show as it is), JSON otherwise. */
export function draftOf(settings: Record<string, unknown>): SettingsDraft {
  const json = JSON.stringify(settings, null, 2);
  if (!Object.values(settings).every((value) => typeof value === 'string')) return { mode: 'json', rows: [], removed: [], json };
  const masked = maskedKeysOf(settings);
  return { mode: 'rows', rows: Object.entries(settings).map(([key, value]) => ({ key, value: value as string, masked: masked.has(key) })), removed: [], json };
}

/** The settings object to send; throws LocalSettingsError for JSON that is not an object, or a key given twice. */
export function settingsOf(draft: SettingsDraft): Record<string, unknown> {
  if (draft.mode === 'json') {
    let parsed: unknown;
    try {
      parsed = draft.json.trim() === '' ? {} : JSON.parse(draft.json);
    } catch (failed) {
      throw new LocalSettingsError(`are not valid JSON: ${failed instanceof Error ? failed.message : String(failed)}`);
    }
    if (!isObject(parsed)) throw new LocalSettingsError('must be a JSON object: {"key": value, …}');
    return parsed;
  }
  // A Map, so that a key such as __proto__ stays an ordinary key.
  const settings = new Map<string, unknown>(draft.removed.map((key) => [key, null]));
  const seen = new Set<string>();
  for (const [index, row] of draft.rows.entries()) {
    const key = row.key.trim();
    if (key === '' && row.value === '') continue;
    if (key === '') throw new LocalSettingsError(`row ${index + 1} has a value but no key`);
    if (seen.has(key)) throw new LocalSettingsError(`have the key ${JSON.stringify(key)} twice`);
    seen.add(key);
    settings.set(key, row.value);
  }
  return Object.fromEntries(settings);
}

/** The settings a test runs with: as they would be saved, less the removed ones. */
export function testSettingsOf(draft: SettingsDraft): Record<string, unknown> {
  return Object.fromEntries(Object.entries(settingsOf(draft)).filter(([, value]) => value !== null));
}

function toJson(draft: SettingsDraft): SettingsDraft {
  return { ...draft, mode: 'json', json: JSON.stringify(settingsOf(draft), null, 2) };
}

function toRows(draft: SettingsDraft, maskedKeys: ReadonlySet<string>): SettingsDraft {
  const rows: SettingRow[] = [];
  const removed: string[] = [];
  for (const [key, value] of Object.entries(settingsOf(draft))) {
    if (value === null && maskedKeys.has(key)) removed.push(key);
    else if (typeof value === 'string') rows.push({ key, value, masked: maskedKeys.has(key) });
    else throw new LocalSettingsError(`value of ${JSON.stringify(key)} is not text: rows hold text only, so keep editing these settings as JSON`);
  }
  return { ...draft, mode: 'rows', rows, removed };
}

/**
 * The settings of a function destination: rows of key and text value, or
 * JSON. A secret-looking setting the API read masked shows as `********`
 * with its key fixed: left as it is, the stored value is kept.
 */
export function SettingsEditor({ draft, maskedKeys, error, onChange, onError }: {
  draft: SettingsDraft;
  /** Keys the API read masked. */
  maskedKeys: ReadonlySet<string>;
  /** An error that belongs to the settings (the API's or the console's own). */
  error: unknown;
  onChange: (draft: SettingsDraft) => void;
  onError: (error: unknown) => void;
}) {
  const update = (index: number, change: Partial<SettingRow>): void => onChange({ ...draft, rows: draft.rows.map((row, i) => (i === index ? { ...row, ...change } : row)) });
  const remove = (index: number): void => {
    const row = draft.rows[index]!;
    onChange({ ...draft, rows: draft.rows.filter((_, i) => i !== index), removed: row.masked ? [...draft.removed, row.key] : draft.removed });
  };
  const switchMode = (): void => {
    try {
      onChange(draft.mode === 'rows' ? toJson(draft) : toRows(draft, maskedKeys));
      onError(undefined);
    } catch (failed) {
      onError(failed);
    }
  };
  const describedBy = error === undefined ? 'settings-hint' : 'settings-hint settings-error';
  return (
    <fieldset>
      <legend>Settings</legend>
      <p class="hint" id="settings-hint">
        Passed to each handler as its second argument, <code>settings</code>. Keys containing key, secret, token, password or auth are secrets: the API
        never shows a stored one, only <code>{MASKED_SETTING}</code>. Leave <code>{MASKED_SETTING}</code> as it is to keep the stored value, type a new
        value to replace it; {draft.mode === 'rows' ? 'removing the setting deletes it' : <>a secret left out is kept too, and <code>null</code> deletes it</>}.
      </p>
      {draft.mode === 'rows' ? (
        <div role="group" aria-label="Settings as rows" aria-describedby={describedBy}>
          {draft.rows.length === 0 && <p class="hint">No settings.</p>}
          {draft.rows.map((row, index) => (
            <div class="setting" key={index}>
              <label>
                Key of setting {index + 1}
                <input
                  type="text"
                  value={row.key}
                  readOnly={row.masked}
                  spellcheck={false}
                  autoComplete="off"
                  onInput={(event) => update(index, { key: (event.target as HTMLInputElement).value })}
                />
              </label>
              <label>
                Value of setting {index + 1}
                <input
                  type="text"
                  value={row.value}
                  spellcheck={false}
                  autoComplete="off"
                  aria-describedby={row.masked && row.value === MASKED_SETTING ? `masked-${index}` : undefined}
                  onInput={(event) => update(index, { value: (event.target as HTMLInputElement).value })}
                />
              </label>
              <button type="button" class="secondary" onClick={() => remove(index)}>
                Remove setting {row.key === '' ? index + 1 : row.key}
              </button>
              {row.masked && row.value === MASKED_SETTING && (
                <p class="hint masked-note" id={`masked-${index}`}>
                  Stored secret, shown masked: kept as it is while the value reads {MASKED_SETTING}.
                </p>
              )}
            </div>
          ))}
          {draft.removed.length > 0 && <p class="hint">Deleted on save: {draft.removed.join(', ')}.</p>}
          <button type="button" class="secondary" onClick={() => onChange({ ...draft, rows: [...draft.rows, { key: '', value: '', masked: false }] })}>
            Add a setting
          </button>
        </div>
      ) : (
        <label>
          Settings (JSON)
          <textarea
            class="code"
            rows={6}
            spellcheck={false}
            value={draft.json}
            aria-invalid={error !== undefined}
            aria-describedby={describedBy}
            onInput={(event) => onChange({ ...draft, json: (event.target as HTMLTextAreaElement).value })}
          />
        </label>
      )}
      {error !== undefined && (
        <p class="error field-error" id="settings-error" role="alert">
          {errorText(error)}
        </p>
      )}
      <button type="button" class="secondary" onClick={switchMode}>
        {draft.mode === 'rows' ? 'Edit settings as JSON' : 'Edit settings as rows'}
      </button>
    </fieldset>
  );
}
