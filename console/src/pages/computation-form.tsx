import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Computation, type Source } from '../api.js';
import { errorText } from '../ui.js';
import type { Kind } from './computation-kinds.js';

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

export function ComputationForm({ kind, editing, sources, onCancel, onSaved }: {
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
