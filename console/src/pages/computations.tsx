import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, type Computation } from '../api.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ConfirmDelete, ErrorMessage, PageTitle, Status, formatTime, useLoad, useSources } from '../ui.js';
import { AudienceMembers } from './audience-members.js';
import { ComputationForm } from './computation-form.js';
import { definitionSummary } from './definition-summary.js';
import { KINDS, type Kind } from './computation-kinds.js';

/** While a computation is `computing` (its first pass over stored history), the list refreshes this often. */
const COMPUTING_REFRESH_MS = 2_000;

export function AudiencesPage({ route }: { route: Route }) {
  return <ComputationsPage kind={KINDS.audience} route={route} />;
}

export function ComputedTraitsPage({ route }: { route: Route }) {
  return <ComputationsPage kind={KINDS.trait} route={route} />;
}

function ComputationsPage({ kind, route }: { kind: Kind; route: Route }) {
  const { sources, error: sourcesError } = useSources();
  const { value: list, error, reload } = useLoad(
    async () => (await api<Partial<Record<Kind['listField'], Computation[]>>>('GET', kind.route))[kind.listField] ?? [],
    [kind.route],
  );
  const [notice, setNotice] = useState('');
  // When editing ends, the keyboard goes back to the row's Edit button (the round makes each return count).
  const [returnFocus, setReturnFocus] = useState({ id: '', round: 0 });
  const editId = route.params.get('edit') ?? '';
  const membersId = route.params.get('members') ?? '';
  const editing = list?.find((c) => c.id === editId);
  const computing = list?.some((c) => c.status === 'computing') === true;
  useEffect(() => {
    if (!computing) return undefined;
    const timer = setTimeout(reload, COMPUTING_REFRESH_MS);
    return () => clearTimeout(timer);
  }, [list, computing, reload]);
  const go = (change: Record<string, string>): void => {
    const params = { edit: editId, members: membersId, ...change };
    navigate(kind.page, Object.fromEntries(Object.entries(params).filter(([, v]) => v !== '')));
  };
  const endEditing = (): void => {
    setReturnFocus((last) => ({ id: editId, round: last.round + 1 }));
    go({ edit: '' });
  };
  const sourceName = (id: string): string => sources?.find((s) => s.id === id)?.name ?? id;

  return (
    <section aria-labelledby="page-title">
      <PageTitle>{kind.title}</PageTitle>
      <p class="hint">{kind.explain}</p>
      <ErrorMessage error={sourcesError} />
      <Status>{notice}</Status>
      <div class="row">
        <button type="button" class="secondary" onClick={reload}>
          Refresh {kind.title.toLowerCase()}
        </button>
      </div>
      <ErrorMessage error={error} />
      {list !== undefined && list.length === 0 && <p>No {kind.title.toLowerCase()} yet. Create one with the form below: {kind.createHint}</p>}
      {list !== undefined && list.length > 0 && (
        <table>
          <caption class="visually-hidden">{kind.title}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">Definition</th>
              {kind.kind === 'audience' && <th scope="col">Size</th>}
              <th scope="col">Status</th>
              <th scope="col">Syncs to</th>
              <th scope="col">Updated</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.map((computation) => (
              <ComputationRow
                key={computation.id}
                kind={kind}
                computation={computation}
                sourceName={sourceName}
                focusRound={returnFocus.id === computation.id ? returnFocus.round : 0}
                onEdit={() => go({ edit: computation.id })}
                onMembers={() => go({ members: computation.id })}
                onDeleted={(text) => {
                  setNotice(text);
                  go({ edit: editId === computation.id ? '' : editId, members: membersId === computation.id ? '' : membersId });
                  reload();
                }}
              />
            ))}
          </tbody>
        </table>
      )}
      {kind.kind === 'audience' && membersId !== '' && (
        <AudienceMembers key={membersId} id={membersId} name={list?.find((c) => c.id === membersId)?.name ?? membersId} onClose={() => go({ members: '' })} />
      )}
      {sources !== undefined && (editId === '' || editing !== undefined) && (
        <ComputationForm
          key={editId}
          kind={kind}
          editing={editing}
          sources={sources}
          onCancel={endEditing}
          onSaved={(text) => {
            setNotice(text);
            if (editId !== '') endEditing();
            reload();
          }}
        />
      )}
      {editId !== '' && list !== undefined && editing === undefined && <p class="error">No {kind.one} with id {editId}.</p>}
    </section>
  );
}

function ComputationRow({ kind, computation, sourceName, focusRound, onEdit, onMembers, onDeleted }: {
  kind: Kind;
  computation: Computation;
  sourceName: (id: string) => string;
  focusRound: number;
  onEdit: () => void;
  onMembers: () => void;
  onDeleted: (notice: string) => void;
}) {
  const [error, setError] = useState<unknown>(undefined);
  const editButton = useRef<HTMLButtonElement>(null);
  useLayoutEffect(() => {
    if (focusRound > 0) editButton.current?.focus();
  }, [focusRound]);
  const remove = async (): Promise<void> => {
    try {
      await api('DELETE', `${kind.route}/${computation.id}`);
      setError(undefined);
      onDeleted(`Deleted ${kind.one} ${computation.name}.`);
    } catch (failed) {
      setError(failed);
    }
  };
  return (
    <tr data-computation-id={computation.id}>
      <td>
        {computation.name}
        <ErrorMessage error={error} />
      </td>
      <td>
        <code>{computation.key}</code>
      </td>
      <td class="definition">{definitionSummary(kind.kind, computation.definition)}</td>
      {kind.kind === 'audience' && <td class="number">{computation.size ?? 0}</td>}
      <td>
        <span class={`badge ${computation.status}`}>{computation.status}</span>
      </td>
      <td>{computation.destinations.length === 0 ? 'No source' : computation.destinations.map(sourceName).join(', ')}</td>
      <td>{formatTime(computation.updatedAt)}</td>
      <td class="actions">
        <button type="button" class="secondary" ref={editButton} onClick={onEdit} aria-label={`Edit ${computation.name}`}>
          Edit
        </button>
        {kind.kind === 'audience' && (
          <button type="button" class="secondary" onClick={onMembers} aria-label={`Members of ${computation.name}`}>
            Members
          </button>
        )}
        <ConfirmDelete
          name={computation.name}
          what={`Its ${kind.one === 'audience' ? 'members stop' : 'values stop'} being computed and synced; the identifies already sent stay where they are. Computations that read its key must be changed first.`}
          onConfirm={() => void remove()}
        />
      </td>
    </tr>
  );
}
