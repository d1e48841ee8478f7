import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type Receiver, type WebhookDestination, settingsToPutBack } from '../api.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ErrorMessage, PageTitle, SourcePicker, Status, errorText, formatTime, useSources } from '../ui.js';

/** As many receivers as the API takes. */
const MAX_RECEIVERS = 5;
/** What the API shows instead of the stored shared secret; sent back, it keeps the secret. */
const MASKED_SECRET = '********';

interface HeaderRow {
  name: string;
  value: string;
}
interface ReceiverForm {
  url: string;
  headers: HeaderRow[];
  maxRequestsPerSecond?: number;
}
interface TestAnswer {
  url: string;
  statusCode?: number;
  error?: string;
  durationMs: number;
  body?: string;
  bodyTruncated?: boolean;
}

function toForm(receiver: Receiver): ReceiverForm {
  return {
    url: receiver.url,
    headers: Object.entries(receiver.headers ?? {}).map(([name, value]) => ({ name, value })),
    ...(receiver.maxRequestsPerSecond !== undefined && { maxRequestsPerSecond: receiver.maxRequestsPerSecond }),
  };
}

function toReceiver(form: ReceiverForm): Receiver {
  const headers = Object.fromEntries(form.headers.filter((h) => h.name.trim() !== '').map((h) => [h.name.trim(), h.value]));
  return {
    url: form.url.trim(),
    ...(Object.keys(headers).length > 0 && { headers }),
    ...(form.maxRequestsPerSecond !== undefined && { maxRequestsPerSecond: form.maxRequestsPerSecond }),
  };
}

/** Which input a validation error belongs to: `url-1`, `headers-0`, `secret`, or the form as a whole. */
function fieldOf(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  if (!(error instanceof ApiError)) return 'form';
  const field = error.field ?? '';
  const receiver = /^settings\.webhooks\[(\d+)\](?:\.(\w+))?/.exec(field);
  if (receiver !== null) return receiver[2] === 'headers' ? `headers-${receiver[1]}` : `url-${receiver[1]}`;
  if (field === 'settings.sharedSecret') return 'secret';
  return 'form';
}

export function WebhooksPage({ route }: { route: Route }) {
  const { sources, error: sourcesError } = useSources();
  const sourceId = route.params.get('source') ?? sources?.[0]?.id ?? '';
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Webhooks destination</PageTitle>
      <ErrorMessage error={sourcesError} />
      {sources !== undefined && sources.length === 0 && <p>Create a source first.</p>}
      {sources !== undefined && sources.length > 0 && (
        <>
          <SourcePicker sources={sources} value={sourceId} onChange={(id) => navigate('webhooks', { source: id })} />
          <WebhookForm key={sourceId} sourceId={sourceId} />
        </>
      )}
    </section>
  );
}

function WebhookForm({ sourceId }: { sourceId: string }) {
  const [loaded, setLoaded] = useState<WebhookDestination | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const [enabled, setEnabled] = useState(true);
  const [receivers, setReceivers] = useState<ReceiverForm[]>([{ url: '', headers: [] }]);
  const [secret, setSecret] = useState('');
  const [saveError, setSaveError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState('');
  const [answers, setAnswers] = useState<TestAnswer[] | undefined>(undefined);
  const [testError, setTestError] = useState<unknown>(undefined);
  const [testing, setTesting] = useState(false);

  const show = (destination: WebhookDestination | null): void => {
    setLoaded(destination);
    setEnabled(destination?.enabled ?? true);
    setReceivers(destination === null || destination.settings.webhooks.length === 0 ? [{ url: '', headers: [] }] : destination.settings.webhooks.map(toForm));
    setSecret('');
  };
  useEffect(() => {
    api<WebhookDestination>('GET', `/sources/${sourceId}/destinations/webhooks`).then(show, (failed: unknown) => {
      if (failed instanceof ApiError && failed.code === 'not_found') show(null);
      else setLoadError(failed);
    });
  }, [sourceId]);

  const secretStored = loaded?.settings.sharedSecret !== undefined;
  const update = (index: number, change: (receiver: ReceiverForm) => ReceiverForm): void =>
    setReceivers((all) => all.map((receiver, i) => (i === index ? change(receiver) : receiver)));

  const save = async (event: Event): Promise<void> => {
    event.preventDefault();
    setNotice('');
    // An empty secret field keeps the stored secret; typing one replaces it.
    const sharedSecret = secret !== '' ? secret : secretStored ? MASKED_SECRET : undefined;
    // Settings this form does not edit (Standard Webhooks, the transformation,
    // ordering) go back as they came, so saving receivers never drops them.
    const { sharedSecret: _stored, ...kept } = settingsToPutBack(loaded?.settings ?? { webhooks: [] });
    const body = {
      enabled,
      settings: {
        ...kept,
        webhooks: receivers.map(toReceiver),
        ...(sharedSecret !== undefined && { sharedSecret }),
      },
      ...(loaded !== null && loaded !== undefined && loaded.filters.length > 0 && { filters: loaded.filters }),
    };
    try {
      show(await api<WebhookDestination>('PUT', `/sources/${sourceId}/destinations/webhooks`, body));
      setSaveError(undefined);
      setNotice('Saved.');
    } catch (failed) {
      setSaveError(failed);
    }
  };

  const sendTest = async (): Promise<void> => {
    setTesting(true);
    setAnswers(undefined);
    setTestError(undefined);
    try {
      setAnswers((await api<{ answers: TestAnswer[] }>('POST', `/sources/${sourceId}/destinations/webhooks/test`)).answers);
    } catch (failed) {
      setTestError(failed);
    } finally {
      setTesting(false);
    }
  };

  if (loadError !== undefined) return <ErrorMessage error={loadError} />;
  if (loaded === undefined) return <p>Loading…</p>;
  const errorAt = fieldOf(saveError);
  const fieldError = (field: string) =>
    errorAt === field ? (
      <p class="error field-error" id={`error-${field}`} role="alert">
        {errorText(saveError)}
      </p>
    ) : null;
  const describedBy = (field: string) => (errorAt === field ? `error-${field}` : undefined);

  return (
    <>
      <form onSubmit={(event) => void save(event)} noValidate aria-label="Webhooks destination">
        <p class="hint">
          {loaded === null ? 'This source has no Webhooks destination yet.' : `Last saved ${formatTime(loaded.updatedAt)}.`} Every accepted message is POSTed
          to each receiver, signed, and retried until it succeeds or its retry window ends.
        </p>
        <label class="checkbox">
          <input type="checkbox" checked={enabled} onChange={(event) => setEnabled((event.target as HTMLInputElement).checked)} />
          Enabled (deliver messages to these receivers)
        </label>
        {receivers.map((receiver, index) => (
          <fieldset key={index} class="receiver">
            <legend>Receiver {index + 1}</legend>
            <label>
              URL of receiver {index + 1}
              <input
                type="text"
                inputMode="url"
                name={`url-${index}`}
                value={receiver.url}
                placeholder="https://example.com/hooks/segment"
                aria-invalid={errorAt === `url-${index}`}
                aria-describedby={describedBy(`url-${index}`)}
                onInput={(event) => update(index, (r) => ({ ...r, url: (event.target as HTMLInputElement).value }))}
              />
            </label>
            {fieldError(`url-${index}`)}
            <div role="group" aria-label={`Static headers of receiver ${index + 1}`} aria-describedby={describedBy(`headers-${index}`)}>
              {receiver.headers.map((header, h) => (
                <div class="row" key={h}>
                  <label class="inline">
                    Header name
                    <input
                      value={header.name}
                      onInput={(event) =>
                        update(index, (r) => ({ ...r, headers: r.headers.map((x, i) => (i === h ? { ...x, name: (event.target as HTMLInputElement).value } : x)) }))
                      }
                    />
                  </label>
                  <label class="inline">
                    Value
                    <input
                      value={header.value}
                      onInput={(event) =>
                        update(index, (r) => ({ ...r, headers: r.headers.map((x, i) => (i === h ? { ...x, value: (event.target as HTMLInputElement).value } : x)) }))
                      }
                    />
                  </label>
                  <button type="button" class="secondary" onClick={() => update(index, (r) => ({ ...r, headers: r.headers.filter((_, i) => i !== h) }))}>
                    Remove header {header.name}
                  </button>
                </div>
              ))}
              <button type="button" class="secondary" onClick={() => update(index, (r) => ({ ...r, headers: [...r.headers, { name: '', value: '' }] }))}>
                Add a header to receiver {index + 1}
              </button>
            </div>
            {fieldError(`headers-${index}`)}
            {receivers.length > 1 && (
              <button type="button" class="danger" onClick={() => setReceivers((all) => all.filter((_, i) => i !== index))}>
                Remove receiver {index + 1}
              </button>
            )}
          </fieldset>
        ))}
        {receivers.length < MAX_RECEIVERS && (
          <button type="button" class="secondary" onClick={() => setReceivers((all) => [...all, { url: '', headers: [] }])}>
            Add a receiver
          </button>
        )}
        <label>
          Shared secret (signs each body as X-Signature, HMAC-SHA1)
          <input
            type="password"
            name="sharedSecret"
            autoComplete="off"
            value={secret}
            placeholder={secretStored ? 'Set; leave empty to keep it' : 'Not set'}
            aria-invalid={errorAt === 'secret'}
            aria-describedby={describedBy('secret')}
            onInput={(event) => setSecret((event.target as HTMLInputElement).value)}
          />
        </label>
        {fieldError('secret')}
        {fieldError('form')}
        <div class="row">
          <button type="submit">Save destination</button>
          <button type="button" class="secondary" disabled={loaded === null || testing} onClick={() => void sendTest()}>
            Send a test message
          </button>
        </div>
        <Status>{notice}</Status>
      </form>
      <ErrorMessage error={testError} />
      {answers !== undefined && (
        <section aria-labelledby="test-answers">
          <h2 id="test-answers">Test message answers</h2>
          <ul class="answers">
            {answers.map((answer) => (
              <li key={answer.url}>
                <code>{answer.url}</code>: {answer.statusCode !== undefined ? `HTTP ${answer.statusCode}` : `failed: ${answer.error ?? 'no answer'}`} in{' '}
                {answer.durationMs} ms
                {answer.body !== undefined && answer.body !== '' && (
                  <pre class="answer-body">
                    {answer.body}
                    {answer.bodyTruncated === true ? '…' : ''}
                  </pre>
                )}
              </li>
            ))}
          </ul>
        </section>
      )}
    </>
  );
}
