import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Computation, type ComputationKind, type Source } from '../api.js';
import type { Route } from '../main.js';
import { navigate } from '../main.js';
import { ConfirmDelete, ErrorMessage, PageTitle, Status, errorText, formatTime, useLoad, useSources } from '../ui.js';
import { AudienceMembers } from './audience-members.js';

/** While a computation is `computing` (its first pass over stored history), the list refreshes this often. */
const COMPUTING_REFRESH_MS = 2_000;

interface Kind {
  readonly kind: ComputationKind;
  readonly page: string;
  readonly route: string;
  readonly title: string;
  readonly one: string;
  readonly listField: 'audiences' | 'computedTraits';
  readonly example: string;
  readonly explain: string;
}

const KINDS: Readonly<Record<ComputationKind, Kind>> = {
  audience: {
    kind: 'audience',
    page: 'audiences',
    route: '/audiences',
    title: 'Audiences',
    one: 'audience',
    listField: 'audiences',
    example: '{"performed": {"event": "Order Completed", "within": "30d", "count": {"op": ">=", "value": 2}}}',
    explain:
      'A condition on profiles: performed, notPerformed, trait, computedTrait, inAudience, notInAudience, combined with and, or and not. Members are synced as identify messages with the audience key set to true when they enter and false when they leave.',
  },
  trait: {
    kind: 'trait',
    page: 'computed-traits',
    route: '/computed-traits',
    title: 'Computed traits',
    one: 'computed trait',
    listField: 'computedTraits',
    example: '{"type": "event_counter", "event": "Order Completed", "within": "30d"}',
    explain:
      'A value per profile: event_counter, aggregation (sum, avg, min, max), most_frequent, first, last, unique_list or unique_list_count over the events that match. Each new value is synced as an identify message with the trait key set to it.',
  },
};

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
      {list !== undefined && list.length === 0 && <p>No {kind.title.toLowerCase()} yet.</p>}
      {list !== undefined && list.length > 0 && (
        <table>
          <caption class="visually-hidden">{kind.title}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
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
          onCancel={() => go({ edit: '' })}
          onSaved={(text) => {
            setNotice(text);
            if (editId !== '') go({ edit: '' });
            reload();
          }}
        />
      )}
      {editId !== '' && list !== undefined && editing === undefined && <p class="error">No {kind.one} with id {editId}.</p>}
    </section>
  );
}

function ComputationRow({ kind, computation, sourceName, onEdit, onMembers, onDeleted }: {
  kind: Kind;
  computation: Computation;
  sourceName: (id: string) => string;
  onEdit: () => void;
  onMembers: () => void;
  onDeleted: (notice: string) => void;
}) {
  const [error, setError] = useState<unknown>(undefined);
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
      {kind.kind === 'audience' && <td class="number">{computation.size ?? 0}</td>}
      <td>
        <span class={`badge ${computation.status}`}>{computation.status}</span>
      </td>
      <td>{computation.destinations.length === 0 ? 'No source' : computation.destinations.map(sourceName).join(', ')}</td>
      <td>{formatTime(computation.updatedAt)}</td>
      <td class="actions">
        <button type="button" class="secondary" onClick={onEdit} aria-label={`Edit ${computation.name}`}>
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

/** Which input an API error belongs to. The definition's messages start with the path of the field at fault. */
function fieldOf(error: unknown): 'name' | 'key' | 'definition' | 'destinations' | 'form' | undefined {
  if (error === undefined) return undefined;
  if (!(error instanceof ApiError)) return 'form';
  if (error.code === 'key_conflict') return 'key';
  const field = error.field ?? '';
  if (field === 'definition' || field.startsWith('definition.') || field.startsWith('definition[')) return 'definition';
  if (field === 'name' || field === 'key') return field;
  if (field.startsWith('destinations')) return 'destinations';
  return 'form';
}

/** A JSON text the API would refuse to read, as an error at the definition field. */
class LocalDefinitionError extends ApiError {
  constructor(message: string) {
    super(400, 'invalid_json', `definition is not valid JSON: ${message}`);
  }
}

function ComputationForm({ kind, editing, sources, onCancel, onSaved }: {
  kind: Kind;
  editing: Computation | undefined;
  sources: Source[];
  onCancel: () => void;
  onSaved: (notice: string) => void;
}) {
  const [name, setName] = useState(editing?.name ?? '');
  const [key, setKey] = useState('');
  const [definition, setDefinition] = useState(editing === undefined ? '' : JSON.stringify(editing.definition, null, 2));
  const [destinations, setDestinations] = useState<string[]>(editing?.destinations ?? []);
  const [saveError, setSaveError] = useState<unknown>(undefined);
  const nameInput = useRef<HTMLInputElement>(null);
  // Editing moves the keyboard to the form it opened.
  useLayoutEffect(() => {
    if (editing !== undefined) nameInput.current?.focus();
  }, []);

  const save = async (event: Event): Promise<void> => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(definition);
    } catch (failed) {
      setSaveError(new LocalDefinitionError(failed instanceof Error ? failed.message : String(failed)));
      return;
    }
    try {
      if (editing === undefined) {
        const body = { name: name.trim(), ...(key.trim() !== '' && { key: key.trim() }), definition: parsed, destinations };
        const created = await api<Computation>('POST', kind.route, body);
        setName('');
        setKey('');
        setDefinition('');
        setDestinations([]);
        setSaveError(undefined);
        onSaved(`Created ${kind.one} ${created.name} (key ${created.key}).`);
      } else {
        const saved = await api<Computation>('PATCH', `${kind.route}/${editing.id}`, { name: name.trim(), definition: parsed, destinations });
        setSaveError(undefined);
        onSaved(`Saved ${kind.one} ${saved.name}.`);
      }
    } catch (failed) {
      setSaveError(failed);
    }
  };

  const errorAt = fieldOf(saveError);
  const fieldError = (field: string) =>
    errorAt === field ? (
      <p class="error field-error" id={`error-${field}`} role="alert">
        {errorText(saveError)}
      </p>
    ) : null;
  const describedBy = (field: string, hint?: string) => [hint, errorAt === field ? `error-${field}` : undefined].filter((id) => id !== undefined).join(' ') || undefined;
  const title = editing === undefined ? `New ${kind.one}` : `Edit ${kind.one} ${editing.name}`;

  return (
    <form class="panel" onSubmit={(event) => void save(event)} noValidate aria-labelledby="computation-form-title">
      <h2 id="computation-form-title">{title}</h2>
      <label>
        Name
        <input
          ref={nameInput}
          name="name"
          maxLength={200}
          value={name}
          aria-invalid={errorAt === 'name'}
          aria-describedby={describedBy('name')}
          onInput={(event) => setName((event.target as HTMLInputElement).value)}
        />
      </label>
      {fieldError('name')}
      {editing === undefined ? (
        <label>
          Key (optional; by default the snake_case form of the name)
          <input
            name="key"
            maxLength={200}
            value={key}
            aria-invalid={errorAt === 'key'}
            aria-describedby={describedBy('key')}
            onInput={(event) => setKey((event.target as HTMLInputElement).value)}
          />
        </label>
      ) : (
        <p>
          Key <code>{editing.key}</code> (a key does not change)
        </p>
      )}
      {fieldError('key')}
      <label>
        Definition (JSON)
        <textarea
          name="definition"
          class="code"
          rows={8}
          spellcheck={false}
          value={definition}
          aria-invalid={errorAt === 'definition'}
          aria-describedby={describedBy('definition', 'definition-hint')}
          onInput={(event) => setDefinition((event.target as HTMLTextAreaElement).value)}
        />
      </label>
      {fieldError('definition')}
      <p class="hint" id="definition-hint">
        For example <code>{kind.example}</code>. The definition language is described in docs/engage.md.
      </p>
      <fieldset aria-describedby={describedBy('destinations')}>
        <legend>Sync to the Webhooks destinations of</legend>
        {sources.length === 0 && <p>No sources yet.</p>}
        {sources.map((source) => (
          <label class="checkbox" key={source.id}>
            <input
              type="checkbox"
              checked={destinations.includes(source.id)}
              onChange={(event) =>
                setDestinations((all) => ((event.target as HTMLInputElement).checked ? [...all, source.id] : all.filter((id) => id !== source.id)))
              }
            />
            {source.name} ({source.id})
          </label>
        ))}
      </fieldset>
      {fieldError('destinations')}
      {fieldError('form')}
      <div class="row">
        <button type="submit">{editing === undefined ? `Create ${kind.one}` : `Save ${kind.one}`}</button>
        {editing !== undefined && (
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel editing
          </button>
        )}
      </div>
    </form>
  );
}
