import { useState } from 'preact/hooks';
import { ApiError, api, type DebuggerEntry, type FunctionTestResult } from '../api.js';
import { AsIngested, ErrorMessage, errorText, Status } from '../ui.js';
import { FetchList, LoggedLines, OutcomeBadge, RunError, formatDuration } from './function-run.js';

/** Most events one test runs (the API's bound), and how many of the source's latest messages "last messages" takes. */
const TEST_EVENTS = 20;

const SAMPLE_EVENTS = `[
  {
    "type": "track",
    "event": "Order Completed",
    "userId": "user-1",
    "messageId": "sample-1",
    "properties": { "total": 30, "currency": "EUR" }
  },
  {
    "type": "identify",
    "userId": "user-1",
    "messageId": "sample-2",
    "traits": { "email": "ada@example.com" }
  }
]
`;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Sample events that are not a JSON list of 1 to 20 objects: reported beside the field before anything is sent. */
class LocalEventsError extends ApiError {
  constructor(message: string) {
    super(400, 'invalid_events', `sample events ${message}`);
  }
}

function sampleEventsOf(text: string): Array<Record<string, unknown>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (failed) {
    throw new LocalEventsError(`are not valid JSON: ${failed instanceof Error ? failed.message : String(failed)}`);
  }
  const events = isObject(parsed) ? [parsed] : parsed;
  if (!Array.isArray(events) || events.length === 0 || events.length > TEST_EVENTS || !events.every(isObject)) {
    throw new LocalEventsError(`must be a message object or a list of 1 to ${TEST_EVENTS} of them`);
  }
  return events;
}

/**
 * Runs the code in the editor (saved or not) with `POST /functions/test` on
 * sample events or on the source's last messages, and shows each event's
 * input beside the outcome, every fetch and the logged lines. The API stores
 * nothing, but the fetches are made for real.
 */
export function FunctionTest({ code, settings, sourceId, sourceName }: {
  code: string;
  /** The settings as the form holds them now (throws when the form's settings are wrong). */
  settings: () => Record<string, unknown>;
  sourceId: string;
  sourceName: string;
}) {
  const [eventsText, setEventsText] = useState(SAMPLE_EVENTS);
  const [eventsError, setEventsError] = useState<unknown>(undefined);
  const [results, setResults] = useState<FunctionTestResult[] | undefined>(undefined);
  const [notice, setNotice] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  const run = async (events: () => Promise<Array<Record<string, unknown>> | undefined>): Promise<void> => {
    setBusy(true);
    setError(undefined);
    setEventsError(undefined);
    setNotice('');
    try {
      let chosen: Array<Record<string, unknown>> | undefined;
      try {
        chosen = await events();
      } catch (failed) {
        if (!(failed instanceof LocalEventsError)) throw failed;
        setEventsError(failed);
        return;
      }
      if (chosen === undefined) return;
      const tested = await api<{ results: FunctionTestResult[] }>('POST', '/functions/test', { code, settings: settings(), events: chosen });
      setResults(tested.results);
      const count = (outcome: FunctionTestResult['outcome']): number => tested.results.filter((r) => r.outcome === outcome).length;
      const fetches = tested.results.reduce((sum, r) => sum + r.fetches.length, 0);
      setNotice(
        `Ran on ${tested.results.length} ${tested.results.length === 1 ? 'event' : 'events'}: ${count('delivered')} delivered, ${count('retry')} to retry, ${count('failed')} failed; ${fetches} ${fetches === 1 ? 'fetch' : 'fetches'} made. Nothing was stored.`,
      );
    } catch (failed) {
      setResults(undefined);
      setError(failed);
    } finally {
      setBusy(false);
    }
  };

  const lastMessages = async (): Promise<Array<Record<string, unknown>> | undefined> => {
    const { messages } = await api<{ messages: DebuggerEntry[] }>('GET', `/sources/${sourceId}/debugger?limit=${TEST_EVENTS}`);
    const events = messages.map((m) => m.message).filter(isObject);
    if (events.length === 0) {
      setResults(undefined);
      setNotice(`${sourceName} has no stored messages yet: send some with its write key (the Live debugger shows them), or test on sample events.`);
      return undefined;
    }
    return events;
  };

  return (
    <section class="panel" aria-labelledby="function-test-title">
      <h2 id="function-test-title">Test the function</h2>
      <p class="hint" id="function-test-hint">
        Runs the code and settings above, saved or not, on each event in a sandbox of its own, under the same network rules as deliveries. Its{' '}
        <code>fetch</code> calls are really made; nothing is stored or retried. A secret shown as <code>********</code> is passed as that text: type
        its value above to test with it.
      </p>
      <label>
        Sample events (JSON: a message or a list of up to {TEST_EVENTS})
        <textarea
          class="code"
          rows={10}
          spellcheck={false}
          value={eventsText}
          aria-invalid={eventsError !== undefined}
          aria-describedby={eventsError === undefined ? undefined : 'events-error'}
          onInput={(event) => setEventsText((event.target as HTMLTextAreaElement).value)}
        />
      </label>
      {eventsError !== undefined && (
        <p class="error field-error" id="events-error" role="alert">
          {errorText(eventsError)}
        </p>
      )}
      <div class="row">
        <button type="button" disabled={busy || code.trim() === ''} aria-describedby="function-test-hint" onClick={() => void run(async () => sampleEventsOf(eventsText))}>
          Run on the sample events
        </button>
        <button type="button" class="secondary" disabled={busy || code.trim() === ''} onClick={() => void run(lastMessages)}>
          Run on the last {TEST_EVENTS} messages of {sourceName}
        </button>
      </div>
      <Status>{notice}</Status>
      <ErrorMessage error={error} />
      {results !== undefined && (
        <ol class="test-results" aria-label="Function test results">
          {results.map((result, i) => (
            <li key={i} class="test-result four">
              <div>
                <h3>Input</h3>
                <pre tabIndex={0}>{JSON.stringify(result.input, null, 2)}</pre>
                <AsIngested filled={result.filled} ingestRejects={result.ingestRejects} />
              </div>
              <div>
                <h3>Outcome</h3>
                <p>
                  <OutcomeBadge outcome={result.outcome} /> in {formatDuration(result.durationMs)}
                </p>
                <RunError error={result.error} errorType={result.errorType} />
              </div>
              <div>
                <h3>Fetches</h3>
                <FetchList fetches={result.fetches} label={`Fetches of event ${i + 1}`} />
              </div>
              <div>
                <h3>Logged</h3>
                <LoggedLines logs={result.logs} />
              </div>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
