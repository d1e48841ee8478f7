import { useEffect, useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ConfirmDelete, ErrorMessage, NoSourceYet, PageTitle, SourcePicker, Status, errorText, formatTime, useSources } from '../ui.js';
import { ObservedSchema, ViolationCounts } from './tracking-plan-observed.js';

/** How many of the source's latest messages the preview checks. */
const PREVIEW_MESSAGES = 20;

/** The fields the API adds to a stored plan; they are not part of what is edited and saved. */
const STORED_FIELDS = ['id', 'sourceId', 'version', 'createdAt'];

const STARTER_PLAN = `{
  "name": "Web",
  "events": {
    "Order Completed": {
      "properties": {
        "type": "object",
        "properties": { "revenue": { "type": "number" } },
        "required": ["revenue"]
      }
    }
  },
  "controls": { "unplannedEvents": "flag", "violations": "flag", "unplannedProperties": "allow" }
}
`;

interface StoredPlan {
  readonly id: string;
  readonly version: number;
  readonly createdAt: string;
  readonly [field: string]: unknown;
}

interface Violation {
  readonly type: string;
  readonly message: string;
  readonly property?: string;
}

interface PreviewEntry {
  readonly seq: number;
  readonly receivedAt: string;
  readonly type?: string;
  readonly status: string;
  readonly event?: string;
  readonly action: 'pass' | 'flag' | 'block' | 'skipped';
  readonly violations: readonly Violation[];
  readonly message: unknown;
}

/** Text that is not JSON, reported beside the plan field before anything is sent. */
class LocalPlanError extends ApiError {
  constructor(message: string) {
    super(400, 'invalid_json', `the plan is not valid JSON: ${message}`);
  }
}

function definitionText(plan: StoredPlan): string {
  const definition = Object.fromEntries(Object.entries(plan).filter(([key]) => !STORED_FIELDS.includes(key)));
  return `${JSON.stringify(definition, null, 2)}\n`;
}

export function TrackingPlanPage({ route }: { route: Route }) {
  const { sources, error: sourcesError } = useSources();
  const sourceId = route.params.get('source') ?? sources?.[0]?.id ?? '';
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Tracking plans</PageTitle>
      <p class="hint">
        A source's tracking plan says which messages it expects and what they must carry, as JSON Schema; processing flags, trims or blocks what breaks it.
      </p>
      <ErrorMessage error={sourcesError} />
      {sources !== undefined && sources.length === 0 && <NoSourceYet />}
      {sources !== undefined && sources.length > 0 && (
        <>
          <SourcePicker sources={sources} value={sourceId} onChange={(id) => navigate('tracking-plan', { source: id })} />
          <PlanEditor key={sourceId} sourceId={sourceId} sourceName={sources.find((s) => s.id === sourceId)?.name ?? sourceId} />
        </>
      )}
    </section>
  );
}

function PlanEditor({ sourceId, sourceName }: { sourceId: string; sourceName: string }) {
  const [stored, setStored] = useState<StoredPlan | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const [text, setText] = useState('');
  const [planError, setPlanError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState('');
  const [preview, setPreview] = useState<{ flagged: number; blocked: number; messages: PreviewEntry[] } | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const show = (plan: StoredPlan | null): void => {
    setStored(plan);
    setText(plan === null ? STARTER_PLAN : definitionText(plan));
  };
  useEffect(() => {
    api<StoredPlan>('GET', `/sources/${sourceId}/tracking-plan`).then(show, (failed: unknown) => {
      if (failed instanceof ApiError && failed.code === 'not_found') show(null);
      else setLoadError(failed);
    });
  }, [sourceId]);

  /** The plan in the editor, or undefined after reporting why it is not JSON. */
  const parsed = (): unknown => {
    try {
      return JSON.parse(text) as unknown;
    } catch (failed) {
      setPlanError(new LocalPlanError(failed instanceof Error ? failed.message : String(failed)));
      return undefined;
    }
  };
  const act = async (work: () => Promise<void>): Promise<void> => {
    setBusy(true);
    setNotice('');
    try {
      await work();
      setPlanError(undefined);
    } catch (failed) {
      setPlanError(failed);
    } finally {
      setBusy(false);
    }
  };
  const save = (event: Event): Promise<void> => {
    event.preventDefault();
    const plan = parsed();
    if (plan === undefined) return Promise.resolve();
    return act(async () => {
      const saved = await api<StoredPlan>('PUT', `/sources/${sourceId}/tracking-plan`, plan);
      show(saved);
      setNotice(`Saved version ${saved.version} of the tracking plan of ${sourceName}. Messages processed from now on are checked against it.`);
    });
  };
  const runPreview = (): Promise<void> => {
    const plan = parsed();
    if (plan === undefined) return Promise.resolve();
    return act(async () => {
      setPreview(await api<{ flagged: number; blocked: number; messages: PreviewEntry[] }>('POST', `/sources/${sourceId}/tracking-plan/preview`, { plan, limit: PREVIEW_MESSAGES }));
    });
  };
  /** Fills the editor with a plan drafted from what the source received; nothing is stored until the user saves. */
  const draft = (): Promise<void> =>
    act(async () => {
      const drafted = await api<unknown>('POST', `/sources/${sourceId}/tracking-plan/from-schema`);
      setText(`${JSON.stringify(drafted, null, 2)}\n`);
      setPreview(undefined);
      setNotice('Drafted a plan from the observed schema of the last 7 days into the editor. Review it, preview it, then save it: nothing is stored until you do.');
    });
  const remove = (): Promise<void> =>
    act(async () => {
      await api('DELETE', `/sources/${sourceId}/tracking-plan`);
      show(null);
      setPreview(undefined);
      setNotice(`Deleted the tracking plan of ${sourceName}: its messages are no longer checked.`);
    });

  if (loadError !== undefined) return <ErrorMessage error={loadError} />;
  if (stored === undefined) return null;
  return (
    <>
      <p class="plan-state">
        {stored === null
          ? `${sourceName} has no tracking plan: every message passes. Edit the example below and save it to start checking.`
          : `Version ${stored.version} (${stored.id}), saved ${formatTime(stored.createdAt)}.`}
      </p>
      <ViolationCounts sourceId={sourceId} planVersion={stored?.version} />
      <form onSubmit={(event) => void save(event)} aria-label="Tracking plan">
        <label>
          Plan (JSON)
          <textarea
            class="code"
            rows={18}
            spellcheck={false}
            value={text}
            onInput={(event) => setText((event.target as HTMLTextAreaElement).value)}
            aria-invalid={planError !== undefined}
            aria-describedby={planError === undefined ? undefined : 'plan-error'}
          />
        </label>
        {planError !== undefined && (
          <p class="error" id="plan-error" role="alert">
            {errorText(planError)}
          </p>
        )}
        <div class="row">
          <button type="submit" disabled={busy}>
            {stored === null ? 'Save plan' : `Save as version ${stored.version + 1}`}
          </button>
          <button type="button" class="secondary" disabled={busy} onClick={() => void runPreview()}>
            Preview on the last {PREVIEW_MESSAGES} messages
          </button>
          <button type="button" class="secondary" disabled={busy} onClick={() => void draft()}>
            Draft from observed schema
          </button>
          {stored !== null && <ConfirmDelete name={`the tracking plan of ${sourceName}`} what="Its messages are no longer checked; the versions stay in the store's history." onConfirm={() => void remove()} />}
        </div>
      </form>
      <Status>{notice}</Status>
      {preview !== undefined && <PlanPreview preview={preview} />}
      <ObservedSchema key={sourceId} sourceId={sourceId} />
    </>
  );
}

function PlanPreview({ preview }: { preview: { flagged: number; blocked: number; messages: PreviewEntry[] } }) {
  const { messages } = preview;
  return (
    <section class="panel" aria-labelledby="preview-title">
      <h2 id="preview-title">Preview on the latest messages</h2>
      <p>
        {messages.length === 0
          ? 'This source has no stored messages yet: send some with its write key, then preview again.'
          : `Of the ${messages.length} latest messages, this plan would flag ${preview.flagged} and block ${preview.blocked}. Nothing was saved or changed.`}
      </p>
      {messages.length > 0 && (
        <div class="scroll-x">
          <table>
            <caption class="visually-hidden">What the plan would do with each message, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Received</th>
                <th scope="col">Message</th>
                <th scope="col">The plan would</th>
                <th scope="col">Violations</th>
              </tr>
            </thead>
            <tbody>
              {messages.map((entry) => (
                <tr key={entry.seq} data-seq={entry.seq}>
                  <td>{formatTime(entry.receivedAt)}</td>
                  <td>
                    <details>
                      <summary>
                        {entry.type ?? 'no type'}
                        {entry.event !== undefined && ` ${entry.event}`}
                      </summary>
                      <pre tabIndex={0}>{JSON.stringify(entry.message, null, 2)}</pre>
                    </details>
                  </td>
                  <td>
                    <span class={`badge verdict-${entry.action}`}>{entry.action === 'skipped' ? 'not check it' : entry.action}</span>
                  </td>
                  <td>
                    {entry.violations.length === 0 ? (
                      <span class="hint">none</span>
                    ) : (
                      <ul class="plain">
                        {entry.violations.map((v, i) => (
                          <li key={i}>
                            <strong>{v.type}</strong>: {v.message}
                          </li>
                        ))}
                      </ul>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
