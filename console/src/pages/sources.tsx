import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, type Source } from '../api.js';
import type { Route } from '../route.js';
import { ErrorMessage, PageTitle, Status, formatTime, useSources } from '../ui.js';

export function SourcesPage(_props: { route: Route }) {
  const { sources, error, reload } = useSources();
  const [name, setName] = useState('');
  const [createError, setCreateError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState('');

  const create = async (event: Event): Promise<void> => {
    event.preventDefault();
    try {
      const created = await api<Source>('POST', '/sources', { name: name.trim() });
      setName('');
      setCreateError(undefined);
      setNotice(`Created source ${created.name}.`);
      reload();
    } catch (failed) {
      setCreateError(failed);
    }
  };

  return (
    <section aria-labelledby="page-title">
      <PageTitle>Sources</PageTitle>
      <form class="row" onSubmit={(event) => void create(event)}>
        <label class="inline">
          New source name
          <input name="name" required maxLength={200} value={name} onInput={(event) => setName((event.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Create source</button>
      </form>
      <ErrorMessage error={createError} />
      <Status>{notice}</Status>
      <ErrorMessage error={error} />
      {sources !== undefined && sources.length === 0 && <p>No sources yet. Name one above and create it: it gets a write key, which your apps send events with.</p>}
      {sources !== undefined && sources.length > 0 && (
        <table>
          <caption class="visually-hidden">Sources</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">Write key</th>
              <th scope="col">State</th>
              <th scope="col">Created</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {sources.map((source) => (
              <SourceRow key={source.id} source={source} onChanged={reload} onNotice={setNotice} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function SourceRow({ source, onChanged, onNotice }: { source: Source; onChanged: () => void; onNotice: (text: string) => void }) {
  const [renaming, setRenaming] = useState(false);
  const [newName, setNewName] = useState(source.name);
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const deleteButton = useRef<HTMLButtonElement>(null);
  const confirmButton = useRef<HTMLButtonElement>(null);
  const wasConfirming = useRef(false);
  const nameInput = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => {
    if (renaming) nameInput.current?.select();
  }, [renaming]);
  // The confirmation takes the focus so the keyboard lands on it; cancelling gives it back.
  useLayoutEffect(() => {
    if (confirming) confirmButton.current?.focus();
    else if (wasConfirming.current) deleteButton.current?.focus();
    wasConfirming.current = confirming;
  }, [confirming]);

  const run = async (action: () => Promise<unknown>, notice: string): Promise<void> => {
    try {
      await action();
      setError(undefined);
      onNotice(notice);
      onChanged();
    } catch (failed) {
      setError(failed);
    }
  };
  const copyKey = async (): Promise<void> => {
    try {
      await navigator.clipboard.writeText(source.writeKey);
      onNotice(`Copied the write key of ${source.name}.`);
    } catch {
      // Clipboard access needs a secure context (HTTPS or localhost); select the key instead.
      const cell = document.getElementById(`key-${source.id}`);
      if (cell !== null) getSelection()?.selectAllChildren(cell);
      onNotice('Copying is not allowed here; the write key is selected, copy it with Ctrl+C.');
    }
  };

  return (
    <tr data-source-id={source.id}>
      <td>
        {renaming ? (
          <form
            class="row"
            onSubmit={(event) => {
              event.preventDefault();
              void run(() => api('PATCH', `/sources/${source.id}`, { name: newName.trim() }), `Renamed to ${newName.trim()}.`).then(() => setRenaming(false));
            }}
          >
            <label class="inline">
              Name of {source.name}
              <input required ref={nameInput} value={newName} onInput={(event) => setNewName((event.target as HTMLInputElement).value)} />
            </label>
            <button type="submit">Save name</button>
            <button type="button" class="secondary" onClick={() => setRenaming(false)}>
              Cancel
            </button>
          </form>
        ) : (
          source.name
        )}
        <ErrorMessage error={error} />
      </td>
      <td>
        <code>{source.id}</code>
      </td>
      <td>
        <code id={`key-${source.id}`}>{source.writeKey}</code>{' '}
        <button type="button" class="secondary" onClick={() => void copyKey()} aria-label={`Copy the write key of ${source.name}`}>
          Copy
        </button>
      </td>
      <td>{source.enabled ? 'Enabled' : 'Disabled'}</td>
      <td>{formatTime(source.createdAt)}</td>
      <td class="actions">
        <a href={`#/webhooks?source=${source.id}`}>Webhooks</a>
        <a href={`#/functions?source=${source.id}`} aria-label={`Functions of ${source.name}`}>
          Functions
        </a>
        <a href={`#/debugger?source=${source.id}`}>Debugger</a>
        <button type="button" class="secondary" onClick={() => setRenaming(true)} aria-label={`Rename ${source.name}`}>
          Rename
        </button>
        <button
          type="button"
          class="secondary"
          onClick={() =>
            void run(() => api('PATCH', `/sources/${source.id}`, { enabled: !source.enabled }), `${source.enabled ? 'Disabled' : 'Enabled'} ${source.name}.`)
          }
          aria-label={`${source.enabled ? 'Disable' : 'Enable'} ${source.name}`}
        >
          {source.enabled ? 'Disable' : 'Enable'}
        </button>
        <button type="button" class="danger" ref={deleteButton} onClick={() => setConfirming(true)} aria-label={`Delete ${source.name}`}>
          Delete
        </button>
        {confirming && (
          <div class="confirm" role="alertdialog" aria-labelledby={`confirm-${source.id}`}>
            <p id={`confirm-${source.id}`}>
              Delete <strong>{source.name}</strong>? Its write key stops working at once, and its Webhooks destination, function destinations, stored
              messages, deliveries and their attempts are deleted for good.
            </p>
            <button
              type="button"
              class="danger"
              ref={confirmButton}
              onClick={() => void run(() => api('DELETE', `/sources/${source.id}`), `Deleted ${source.name}.`)}
            >
              Delete {source.name} for good
            </button>
            <button type="button" class="secondary" onClick={() => setConfirming(false)}>
              Keep it
            </button>
          </div>
        )}
      </td>
    </tr>
  );
}
