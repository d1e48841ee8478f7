import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type TransformationSummary, type TransformationVersion } from '../api.js';
import { CodeEditor } from '../code-editor.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ConfirmDelete, ErrorMessage, PageTitle, Status, errorText, formatTime, useLoad, useSources } from '../ui.js';
import { TransformationAttach } from './transformation-attach.js';
import { TransformationTest } from './transformation-test.js';

/** What a new transformation starts from: RudderStack's shape, doing nothing yet. */
const STARTER_CODE = `export function transformEvent(event, metadata) {
  // Return the event (changed or not) to deliver it, null to drop it,
  // or an array to deliver each element as its own message.
  return event;
}
`;

export function TransformationsPage({ route }: { route: Route }) {
  const { value: list, error, reload } = useLoad(async () => (await api<{ transformations: TransformationSummary[] }>('GET', '/transformations')).transformations, []);
  const { sources } = useSources();
  const [notice, setNotice] = useState('');
  const [rowError, setRowError] = useState<{ id: string; error: unknown } | undefined>(undefined);
  const selectedId = route.params.get('id') ?? '';
  const version = route.params.get('version') ?? '';
  const creating = route.params.get('new') === '1';

  const remove = async (transformation: TransformationSummary): Promise<void> => {
    try {
      await api('DELETE', `/transformations/${transformation.id}`);
      setRowError(undefined);
      setNotice(`Deleted transformation ${transformation.name}.`);
      if (selectedId === transformation.id) navigate('transformations');
      reload();
    } catch (failed) {
      setRowError({ id: transformation.id, error: failed });
    }
  };

  return (
    <section aria-labelledby="page-title">
      <PageTitle>Transformations</PageTitle>
      <p class="hint">
        JavaScript that reshapes, drops or splits each message of a source before its deliveries exist, written as RudderStack's transformations are
        (<code>transformEvent(event, metadata)</code> or <code>transformBatch(events, metadata)</code>). Every save is a new version.
      </p>
      <Status>{notice}</Status>
      <div class="row">
        <button type="button" onClick={() => navigate('transformations', { new: '1' })}>
          New transformation
        </button>
        <button type="button" class="secondary" onClick={reload}>
          Refresh transformations
        </button>
      </div>
      <ErrorMessage error={error} />
      {list !== undefined && list.length === 0 && <p>No transformations yet. Write one with New transformation, test it on a source's messages, then attach it.</p>}
      {list !== undefined && list.length > 0 && (
        <div class="scroll-x">
          <table>
            <caption class="visually-hidden">Transformations</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Latest version</th>
                <th scope="col">Updated</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((transformation) => (
                <tr key={transformation.id} data-transformation-id={transformation.id} aria-selected={transformation.id === selectedId}>
                  <td>{transformation.name}</td>
                  <td>
                    <code>{transformation.id}</code>
                  </td>
                  <td>v{transformation.version}</td>
                  <td>{formatTime(transformation.updatedAt)}</td>
                  <td class="actions">
                    <button type="button" class="secondary" onClick={() => navigate('transformations', { id: transformation.id })} aria-label={`Open ${transformation.name}`}>
                      Open
                    </button>
                    <ConfirmDelete
                      name={transformation.name}
                      what="Every version of its code is deleted. The API refuses while a Webhooks destination uses it: detach it first."
                      onConfirm={() => void remove(transformation)}
                    />
                    {rowError?.id === transformation.id && <ErrorMessage error={rowError.error} />}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {(creating || selectedId !== '') && (
        <TransformationEditor
          key={`${selectedId}@${version}`}
          id={selectedId === '' ? undefined : selectedId}
          version={version === '' ? undefined : Number(version)}
          sources={sources}
          onSaved={(saved, created) => {
            setNotice(created ? `Created transformation ${saved.name} (version 1).` : `Saved version ${saved.version} of ${saved.name}.`);
            reload();
            navigate('transformations', { id: saved.id });
          }}
        />
      )}
    </section>
  );
}

type Loaded = TransformationVersion & { versions: Array<{ version: number; createdAt: string }> };

function TransformationEditor({ id, version, sources, onSaved }: {
  id: string | undefined;
  version: number | undefined;
  sources: ReturnType<typeof useSources>['sources'];
  onSaved: (saved: TransformationVersion, created: boolean) => void;
}) {
  const [loaded, setLoaded] = useState<Loaded | undefined>(undefined);
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const [name, setName] = useState('');
  const [code, setCode] = useState(id === undefined ? STARTER_CODE : '');
  const [saveError, setSaveError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (id === undefined) return;
    void (async () => {
      try {
        const latest = await api<Loaded>('GET', `/transformations/${id}`);
        const shown = version === undefined || version === latest.version ? latest : await api<TransformationVersion>('GET', `/transformations/${id}/versions/${version}`);
        setLoaded(latest);
        setName(latest.name);
        setCode(shown.code);
      } catch (failed) {
        setLoadError(failed);
      }
    })();
  }, [id, version]);

  const save = async (event: Event): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    try {
      const saved =
        id === undefined
          ? await api<TransformationVersion>('POST', '/transformations', { name: name.trim(), code })
          : await api<TransformationVersion>('PUT', `/transformations/${id}`, { code, ...(name.trim() !== loaded?.name && { name: name.trim() }) });
      setSaveError(undefined);
      onSaved(saved, id === undefined);
    } catch (failed) {
      setSaveError(failed);
    } finally {
      setBusy(false);
    }
  };

  const codeError = saveError instanceof ApiError && saveError.code === 'invalid_transformation' ? saveError : undefined;
  const nameError = saveError instanceof ApiError && saveError.field === 'name' ? saveError : undefined;
  const otherError = saveError !== undefined && codeError === undefined && nameError === undefined ? saveError : undefined;
  const shownVersion = version ?? loaded?.version;
  const title = id === undefined ? 'New transformation' : `${loaded?.name ?? id}`;

  return (
    <>
      <section class="panel" aria-labelledby="editor-title">
        <h2 id="editor-title">{title}</h2>
        <ErrorMessage error={loadError} />
        {loaded !== undefined && (
          <div class="row">
            <label class="inline">
              Version
              <select value={String(shownVersion)} onChange={(event) => navigate('transformations', { id: loaded.id, version: (event.target as HTMLSelectElement).value })}>
                {[...loaded.versions].reverse().map((v) => (
                  <option key={v.version} value={String(v.version)}>
                    v{v.version}
                    {v.version === loaded.version ? ' (latest)' : ''} · {formatTime(v.createdAt)}
                  </option>
                ))}
              </select>
            </label>
            {shownVersion !== loaded.version && <span class="hint">An older version: saving makes its code version {loaded.version + 1}.</span>}
          </div>
        )}
        {(id === undefined || loaded !== undefined) && (
          <form onSubmit={(event) => void save(event)} aria-label="Transformation code">
            <label>
              Name
              <input type="text" required maxLength={200} value={name} onInput={(event) => setName((event.target as HTMLInputElement).value)} aria-invalid={nameError !== undefined} aria-describedby={nameError === undefined ? undefined : 'name-error'} />
            </label>
            {nameError !== undefined && (
              <p class="error" id="name-error" role="alert">
                {errorText(nameError)}
              </p>
            )}
            <CodeEditor code={code} onInput={setCode} error={codeError} />
            <ErrorMessage error={otherError} />
            <button type="submit" disabled={busy}>
              {id === undefined ? 'Create transformation' : `Save as version ${(loaded?.version ?? 0) + 1}`}
            </button>
          </form>
        )}
      </section>
      <TransformationTest code={code} sources={sources} />
      {loaded !== undefined && <TransformationAttach transformation={loaded} sources={sources} />}
    </>
  );
}
