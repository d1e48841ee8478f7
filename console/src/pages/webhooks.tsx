import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type Receiver, type WebhookDestination, settingsToPutBack } from '../api.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ErrorMessage, NoSourceYet, PageTitle, SourcePicker, Status, errorText, formatTime, useSources } from '../ui.js';
import { StandardWebhooks } from './standard-webhooks.js';

/** What the API shows instead of a credential-looking static header's value; sent back, it keeps the stored value. */
const MASKED_HEADER = '********';

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
  /** As typed: empty means no cap. */
  maxRequestsPerSecond: string;
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
    maxRequestsPerSecond: receiver.maxRequestsPerSecond === undefined ? '' : String(receiver.maxRequestsPerSecond),
  };
}

function toReceiver(form: ReceiverForm): Receiver {
  const headers = Object.fromEntries(form.headers.filter((h) => h.name.trim() !== '').map((h) => [h.name.trim(), h.value]));
  return {
    url: form.url.trim(),
    ...(Object.keys(headers).length > 0 && { headers }),
    // Not a number (NaN goes as null): the API names the field.
    ...(form.maxRequestsPerSecond.trim() !== '' && { maxRequestsPerSecond: Number(form.maxRequestsPerSecond.trim()) }),
  };
}

/** Filters as typed that are not JSON: reported beside the filters field before anything is sent. */
class LocalFiltersError extends ApiError {
  constructor(message: string) {
    super(400, 'invalid_json', `filters are not valid JSON: ${message}`);
  }
}

/** Which input a validation error belongs to: `url-1`, `headers-0`, `secret`, or the form as a whole. */
function fieldOf(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  if (!(error instanceof ApiError)) return 'form';
  const field = error.field ?? '';
  if (error.code === 'invalid_filter' || error instanceof LocalFiltersError) return 'filters';
  const receiver = /^settings\.webhooks\[(\d+)\](?:\.(\w+))?/.exec(field);
  if (receiver !== null) {
    if (receiver[2] === 'headers') return `headers-${receiver[1]}`;
    return receiver[2] === 'maxRequestsPerSecond' ? `rate-${receiver[1]}` : `url-${receiver[1]}`;
  }
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
      {sources !== undefined && sources.length === 0 && <NoSourceYet />}
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
  const [receivers, setReceivers] = useState<ReceiverForm[]>([{ url: '', headers: [], maxRequestsPerSecond: '' }]);
  const [secret, setSecret] = useState('');
  const [filtersText, setFiltersText] = useState('[]');
  const [saveError, setSaveError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState('');
  const [answers, setAnswers] = useState<TestAnswer[] | undefined>(undefined);
  const [testError, setTestError] = useState<unknown>(undefined);
  const [testing, setTesting] = useState(false);

  const show = (destination: WebhookDestination | null): void => {
    setLoaded(destination);
    setEnabled(destination?.enabled ?? true);
    setReceivers(destination === null || destination.settings.webhooks.length === 0 ? [{ url: '', headers: [], maxRequestsPerSecond: '' }] : destination.settings.webhooks.map(toForm));
    setSecret('');
    setFiltersText(JSON.stringify(destination?.filters ?? [], null, 2));
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
    let filters: unknown;
    try {
      filters = filtersText.trim() === '' ? [] : JSON.parse(filtersText);
    } catch (failed) {
      setSaveError(new LocalFiltersError(failed instanceof Error ? failed.message : String(failed)));
      return;
    }
    const body = {
      enabled,
      settings: {
        ...kept,
        webhooks: receivers.map(toReceiver),
        ...(sharedSecret !== undefined && { sharedSecret }),
      },
      ...(!(Array.isArray(filters) && filters.length === 0) && { filters }),
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
            {receiver.headers.some((header) => header.value === MASKED_HEADER) && (
              <p class="hint">
                A header named like a credential (auth, key, secret, token, password, cookie, signature) is shown as {MASKED_HEADER}: left as it is, the stored value
                is kept; type a new value to replace it.
              </p>
            )}
            {fieldError(`headers-${index}`)}
            <label>
              Most requests per second to receiver {index + 1}
              <input
                type="text"
                inputMode="numeric"
                value={receiver.maxRequestsPerSecond}
                placeholder="No cap"
                aria-invalid={errorAt === `rate-${index}`}
                aria-describedby={describedBy(`rate-${index}`) ?? `rate-hint-${index}`}
                onInput={(event) => update(index, (r) => ({ ...r, maxRequestsPerSecond: (event.target as HTMLInputElement).value }))}
              />
            </label>
            <p class="hint" id={`rate-hint-${index}`}>
              1 to 10,000; work over the cap waits its turn, nothing is dropped. Empty: no cap.
            </p>
            {fieldError(`rate-${index}`)}
            {receivers.length > 1 && (
              <button type="button" class="danger" onClick={() => setReceivers((all) => all.filter((_, i) => i !== index))}>
                Remove receiver {index + 1}
              </button>
            )}
          </fieldset>
        ))}
        {receivers.length < MAX_RECEIVERS && (
          <button type="button" class="secondary" onClick={() => setReceivers((all) => [...all, { url: '', headers: [], maxRequestsPerSecond: '' }])}>
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
        <label>
          Filters (JSON)
          <textarea
            class="code"
            rows={6}
            spellcheck={false}
            value={filtersText}
            aria-invalid={errorAt === 'filters'}
            aria-describedby={describedBy('filters') ?? 'filters-hint'}
            onInput={(event) => setFiltersText((event.target as HTMLTextAreaElement).value)}
          />
        </label>
        <p class="hint" id="filters-hint">
          Applied in order to each message: <code>{'{"title", "if": {"field", "op", "value"}, "action": "drop" | "keep" | {"dropFields": [paths]}}'}</code>. A dropped
          message shows in the debugger as filtered. <code>[]</code>: none.
        </p>
        {fieldError('filters')}
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
      {loaded !== null && <StandardWebhooks sourceId={sourceId} destination={loaded} onSaved={show} />}
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
