import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type FunctionDestination, type Source } from '../api.js';
import { CodeEditor } from '../code-editor.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ConfirmDelete, ErrorMessage, PageTitle, SourcePicker, Status, errorText, formatTime, useLoad, useSources } from '../ui.js';
import { FunctionTest } from './function-test.js';
import { type SettingsDraft, SettingsEditor, draftOf, maskedKeysOf, settingsOf, testSettingsOf } from './function-settings.js';

/** What a new function starts from: Segment's destination-function shape. */
const STARTER_CODE = `// One handler per message type: onTrack, onIdentify, onPage, onScreen,
// onGroup, onAlias, onDelete (event, settings). Returning means delivered.
async function onTrack(event, settings) {
  const res = await fetch(settings.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(event),
  });
  console.log('sent', event.event, 'got', res.status);
  // RetryError is retried; any other error fails the delivery at once.
  if (res.status >= 500) throw new RetryError('got ' + res.status);
}
`;

/** Most function destinations a source may have (the API's bound). */
const MAX_FUNCTIONS = 5;

export function FunctionsPage({ route }: { route: Route }) {
  const { sources, error: sourcesError } = useSources();
  const source = sources?.find((s) => s.id === route.params.get('source')) ?? sources?.[0];
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Function destinations</PageTitle>
      <p class="hint">
        JavaScript of your own that delivers a source's messages, written as Segment's destination functions are (<code>onTrack(event, settings)</code>
        , <code>fetch</code>, <code>RetryError</code>, …), up to {MAX_FUNCTIONS} per source beside its Webhooks destination. A function's name is its key
        in a message's <code>integrations</code>.
      </p>
      <ErrorMessage error={sourcesError} />
      {sources !== undefined && sources.length === 0 && <p>Create a source first.</p>}
      {source !== undefined && sources !== undefined && (
        <>
          <SourcePicker sources={sources} value={source.id} onChange={(id) => navigate('functions', { source: id })} />
          <FunctionList key={source.id} source={source} route={route} />
        </>
      )}
    </section>
  );
}

function FunctionList({ source, route }: { source: Source; route: Route }) {
  const { value: list, error, reload } = useLoad(
    async () => (await api<{ functions: FunctionDestination[] }>('GET', `/sources/${source.id}/destinations/functions`)).functions,
    [source.id],
  );
  const [notice, setNotice] = useState('');
  const [rowError, setRowError] = useState<{ id: string; error: unknown } | undefined>(undefined);
  /** Bumped after each save, so the editor reads the function back as stored. */
  const [saves, setSaves] = useState(0);
  const selectedId = route.params.get('id') ?? '';
  const creating = route.params.get('new') === '1';

  const change = async (fn: FunctionDestination, action: () => Promise<unknown>, done: string): Promise<void> => {
    try {
      await action();
      setRowError(undefined);
      setNotice(done);
      reload();
    } catch (failed) {
      setRowError({ id: fn.id, error: failed });
    }
  };
  const toggle = (fn: FunctionDestination): Promise<void> =>
    change(fn, () => api('PUT', `/sources/${source.id}/destinations/functions/${fn.id}`, { enabled: !fn.enabled }), `${fn.enabled ? 'Disabled' : 'Enabled'} ${fn.name}.`);
  const remove = async (fn: FunctionDestination): Promise<void> => {
    await change(fn, () => api('DELETE', `/sources/${source.id}/destinations/functions/${fn.id}`), `Deleted function destination ${fn.name}.`);
    if (selectedId === fn.id) navigate('functions', { source: source.id });
  };

  return (
    <>
      <Status>{notice}</Status>
      <div class="row">
        <button type="button" disabled={list !== undefined && list.length >= MAX_FUNCTIONS} onClick={() => navigate('functions', { source: source.id, new: '1' })}>
          New function destination
        </button>
        <button type="button" class="secondary" onClick={reload}>
          Refresh functions
        </button>
      </div>
      <ErrorMessage error={error} />
      {list !== undefined && list.length === 0 && <p>{source.name} has no function destinations yet. Write one with New function destination and test it before saving.</p>}
      {list !== undefined && list.length > 0 && (
        <div class="scroll-x">
          <table>
            <caption class="visually-hidden">Function destinations of {source.name}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Version</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((fn) => (
                <tr key={fn.id} data-function-id={fn.id} aria-selected={fn.id === selectedId}>
                  <td>
                    {fn.name}
                    <br />
                    <code class="hint">{fn.id}</code>
                  </td>
                  <td>{fn.enabled ? 'Enabled' : 'Disabled'}</td>
                  <td>v{fn.version}</td>
                  <td>{formatTime(fn.createdAt)}</td>
                  <td class="actions">
                    <button type="button" class="secondary" onClick={() => navigate('functions', { source: source.id, id: fn.id })} aria-label={`Edit ${fn.name}`}>
                      Edit
                    </button>
                    <button type="button" class="secondary" onClick={() => void toggle(fn)} aria-label={`${fn.enabled ? 'Disable' : 'Enable'} ${fn.name}`}>
                      {fn.enabled ? 'Disable' : 'Enable'}
                    </button>
                    <ConfirmDelete
                      name={fn.name}
                      what="Its code (every version) and settings are deleted, and its pending deliveries fail."
                      onConfirm={() => void remove(fn)}
                    />
                    {rowError?.id === fn.id && <ErrorMessage error={rowError.error} />}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {(creating || selectedId !== '') && (
        <FunctionEditor
          key={`${selectedId}#${saves}`}
          source={source}
          id={selectedId === '' ? undefined : selectedId}
          onSaved={(saved, created) => {
            setNotice(created ? `Created function destination ${saved.name} (version 1).` : `Saved ${saved.name} (version ${saved.version}).`);
            reload();
            setSaves((n) => n + 1);
            navigate('functions', { source: source.id, id: saved.id });
          }}
        />
      )}
    </>
  );
}

/** Which field an error of a save belongs to. */
function fieldOf(error: unknown): 'code' | 'name' | 'settings' | 'rate' | 'form' | undefined {
  if (error === undefined) return undefined;
  if (!(error instanceof ApiError)) return 'form';
  if (error.code === 'invalid_function') return 'code';
  if (error.code === 'function_name_taken' || error.field === 'name') return 'name';
  if (error.field?.startsWith('settings') === true) return 'settings';
  return error.field === 'maxRequestsPerSecond' ? 'rate' : 'form';
}

/** As typed: digits go as a number; anything else goes as typed, for the API to name the field. */
function rateOf(text: string): number | string | null {
  const trimmed = text.trim();
  if (trimmed === '') return null;
  return /^\d{1,9}$/.test(trimmed) ? Number(trimmed) : trimmed;
}

function FunctionEditor({ source, id, onSaved }: { source: Source; id: string | undefined; onSaved: (saved: FunctionDestination, created: boolean) => void }) {
  const [loaded, setLoaded] = useState<FunctionDestination | undefined>(undefined);
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const [name, setName] = useState('');
  const [enabled, setEnabled] = useState(true);
  const [code, setCode] = useState(id === undefined ? STARTER_CODE : '');
  const [draft, setDraft] = useState<SettingsDraft>(() => draftOf({}));
  const [maskedKeys, setMaskedKeys] = useState<ReadonlySet<string>>(new Set());
  const [rate, setRate] = useState('');
  const [saveError, setSaveError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (id === undefined) return;
    api<FunctionDestination>('GET', `/sources/${source.id}/destinations/functions/${id}`).then((fn) => {
      setLoaded(fn);
      setName(fn.name);
      setCode(fn.code ?? '');
      setDraft(draftOf(fn.settings));
      setMaskedKeys(maskedKeysOf(fn.settings));
      setRate(fn.maxRequestsPerSecond === undefined ? '' : String(fn.maxRequestsPerSecond));
    }, setLoadError);
  }, [source.id, id]);

  const codeChanged = loaded === undefined || code !== loaded.code;
  const save = async (event: Event): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    try {
      const settings = settingsOf(draft);
      const saved =
        id === undefined
          ? await api<FunctionDestination>('POST', `/sources/${source.id}/destinations/functions`, {
              name,
              code,
              settings,
              enabled,
              ...(rateOf(rate) !== null && { maxRequestsPerSecond: rateOf(rate) }),
            })
          : await api<FunctionDestination>('PUT', `/sources/${source.id}/destinations/functions/${id}`, {
              ...(name !== loaded?.name && { name }),
              ...(codeChanged && { code }),
              settings,
              maxRequestsPerSecond: rateOf(rate),
            });
      setSaveError(undefined);
      onSaved(saved, id === undefined);
    } catch (failed) {
      setSaveError(failed);
    } finally {
      setBusy(false);
    }
  };

  const errorAt = fieldOf(saveError);
  const fieldError = (field: string) =>
    errorAt === field ? (
      <p class="error field-error" id={`function-${field}-error`} role="alert">
        {errorText(saveError)}
      </p>
    ) : null;
  const describedBy = (field: string, hint?: string) => [hint, errorAt === field ? `function-${field}-error` : undefined].filter((x) => x !== undefined).join(' ') || undefined;
  const title = id === undefined ? 'New function destination' : loaded === undefined ? id : `${loaded.name} (version ${loaded.version})`;
  if (loadError !== undefined) return <ErrorMessage error={loadError} />;

  return (
    <>
      <section class="panel" aria-labelledby="function-editor-title">
        <h2 id="function-editor-title">{title}</h2>
        {id !== undefined && loaded === undefined && <p>Loading…</p>}
        {(id === undefined || loaded !== undefined) && (
          <form onSubmit={(event) => void save(event)} noValidate aria-label="Function destination">
            <label>
              Name
              <input
                type="text"
                required
                maxLength={100}
                value={name}
                aria-invalid={errorAt === 'name'}
                aria-describedby={describedBy('name', 'function-name-hint')}
                onInput={(event) => setName((event.target as HTMLInputElement).value)}
              />
            </label>
            <p class="hint" id="function-name-hint">
              Unique on {source.name}; messages name it in <code>integrations</code> to skip it (<code>{'{"Name": false}'}</code>) or send only to it.
            </p>
            {fieldError('name')}
            {id === undefined && (
              <label class="checkbox">
                <input type="checkbox" checked={enabled} onChange={(event) => setEnabled((event.target as HTMLInputElement).checked)} />
                Enabled (deliver {source.name}'s messages to this function)
              </label>
            )}
            <CodeEditor code={code} onInput={setCode} error={errorAt === 'code' ? (saveError as ApiError) : undefined} />
            <SettingsEditor draft={draft} maskedKeys={maskedKeys} error={errorAt === 'settings' ? saveError : undefined} onChange={setDraft} onError={setSaveError} />
            <label>
              Most calls per second
              <input
                type="text"
                inputMode="numeric"
                value={rate}
                placeholder="No cap"
                aria-invalid={errorAt === 'rate'}
                aria-describedby={describedBy('rate', 'function-rate-hint')}
                onInput={(event) => setRate((event.target as HTMLInputElement).value)}
              />
            </label>
            <p class="hint" id="function-rate-hint">
              1 to 10,000; calls over the cap wait their turn, nothing is dropped. Empty: no cap.
            </p>
            {fieldError('rate')}
            {fieldError('form')}
            <button type="submit" disabled={busy}>
              {id === undefined ? 'Create function destination' : codeChanged ? `Save as version ${(loaded?.version ?? 0) + 1}` : 'Save changes'}
            </button>
            {id !== undefined && (
              <p class="hint">Changed code is saved as a new version; the name, settings and cap change in place. Enable or disable it in the list above.</p>
            )}
          </form>
        )}
      </section>
      {(id === undefined || loaded !== undefined) && <FunctionTest code={code} settings={() => testSettingsOf(draft)} sourceId={source.id} sourceName={source.name} />}
    </>
  );
}
