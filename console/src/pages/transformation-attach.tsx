import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, settingsToPutBack, type Source, type TransformationRef, type WebhookDestination } from '../api.js';
import { ErrorMessage, NoSourceYet, SourcePicker, Status } from '../ui.js';

/** A transformation reference in words: `shop-cleanup (tr_…) v2, pinned` or `…, latest version`. */
function describe(ref: TransformationRef, name: string | undefined): string {
  const who = name === undefined ? ref.id : `${name} (${ref.id})`;
  return ref.version === undefined ? `${who}, latest version` : `${who} v${ref.version}, pinned`;
}

/**
 * Attaches the open transformation to a source's Webhooks destination (the
 * latest version, or one pinned) or detaches what is attached: a PUT of the
 * destination as read, with only `settings.transformation` changed.
 */
export function TransformationAttach({ transformation, sources }: {
  transformation: { id: string; name: string; version: number; versions: Array<{ version: number }> };
  sources: Source[] | undefined;
}) {
  const [sourceId, setSourceId] = useState('');
  const chosen = sourceId !== '' ? sourceId : (sources?.[0]?.id ?? '');
  const [destination, setDestination] = useState<WebhookDestination | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const [pinned, setPinned] = useState('');
  const [notice, setNotice] = useState('');
  const [error, setError] = useState<unknown>(undefined);

  useEffect(() => {
    if (chosen === '') return;
    setDestination(undefined);
    setLoadError(undefined);
    api<WebhookDestination>('GET', `/sources/${chosen}/destinations/webhooks`).then(setDestination, (failed: unknown) => {
      if (failed instanceof ApiError && failed.code === 'not_found') setDestination(null);
      else setLoadError(failed);
    });
  }, [chosen]);

  const sourceName = sources?.find((s) => s.id === chosen)?.name ?? chosen;
  const attached = destination?.settings.transformation;
  const put = async (ref: TransformationRef | undefined, done: string): Promise<void> => {
    if (destination === null || destination === undefined) return;
    const { transformation: _previous, ...settings } = settingsToPutBack(destination.settings);
    try {
      const saved = await api<WebhookDestination>('PUT', `/sources/${chosen}/destinations/webhooks`, {
        enabled: destination.enabled,
        settings: { ...settings, ...(ref !== undefined && { transformation: ref }) },
        ...(destination.filters.length > 0 && { filters: destination.filters }),
      });
      setDestination(saved);
      setError(undefined);
      setNotice(done);
    } catch (failed) {
      setNotice('');
      setError(failed);
    }
  };
  const attach = (): Promise<void> => {
    const ref: TransformationRef = pinned === '' ? { id: transformation.id } : { id: transformation.id, version: Number(pinned) };
    return put(ref, `Attached ${describe(ref, transformation.name)} to the Webhooks destination of ${sourceName}.`);
  };

  return (
    <section class="panel" aria-labelledby="attach-title">
      <h2 id="attach-title">Attach to a source</h2>
      <p class="hint">An attached transformation runs once on each new message of the source, before its deliveries exist; every receiver, retry and replay gets its output.</p>
      {sources !== undefined && sources.length === 0 && <NoSourceYet />}
      {sources !== undefined && sources.length > 0 && <SourcePicker sources={sources} value={chosen} label="Source" onChange={setSourceId} />}
      <ErrorMessage error={loadError} />
      {destination === null && (
        <p>
          {sourceName} has no Webhooks destination yet: set its receivers on the <a href={`#/webhooks?source=${chosen}`}>Webhooks page</a> first.
        </p>
      )}
      {destination !== null && destination !== undefined && (
        <>
          <p class="attached">
            {attached === undefined
              ? `No transformation is attached to ${sourceName}.`
              : `Attached to ${sourceName}: ${describe(attached, attached.id === transformation.id ? transformation.name : undefined)}.`}
          </p>
          <div class="row">
            <label class="inline">
              Version to run
              <select value={pinned} onChange={(event) => setPinned((event.target as HTMLSelectElement).value)}>
                <option value="">Latest (follows every save)</option>
                {[...transformation.versions].reverse().map((v) => (
                  <option key={v.version} value={String(v.version)}>
                    v{v.version} only
                  </option>
                ))}
              </select>
            </label>
            <button type="button" onClick={() => void attach()}>
              Attach {transformation.name}
            </button>
            {attached !== undefined && (
              <button type="button" class="secondary" onClick={() => void put(undefined, `Detached the transformation from ${sourceName}.`)}>
                Detach
              </button>
            )}
          </div>
          {attached !== undefined && attached.id !== transformation.id && <p class="hint">Attaching replaces the transformation attached now.</p>}
        </>
      )}
      <Status>{notice}</Status>
      <ErrorMessage error={error} />
    </section>
  );
}
