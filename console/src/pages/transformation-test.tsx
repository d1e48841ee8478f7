import { useState } from 'preact/hooks';
import { api, type DebuggerEntry, type Source, type TransformationTestResult } from '../api.js';
import { AsIngested, ErrorMessage, SourcePicker, Status } from '../ui.js';

/** How many of a source's latest messages a test runs on. */
const TEST_MESSAGES = 20;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Runs the code in the editor (saved or not) on a source's last messages with
 * `POST /transformations/test`, which stores nothing, and shows each input
 * beside its output and logged lines.
 */
export function TransformationTest({ code, sources }: { code: string; sources: Source[] | undefined }) {
  const [sourceId, setSourceId] = useState('');
  const [results, setResults] = useState<TransformationTestResult[] | undefined>(undefined);
  const [notice, setNotice] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const chosen = sourceId !== '' ? sourceId : (sources?.[0]?.id ?? '');

  const run = async (): Promise<void> => {
    setBusy(true);
    setError(undefined);
    setNotice('');
    try {
      const { messages } = await api<{ messages: DebuggerEntry[] }>('GET', `/sources/${chosen}/debugger?limit=${TEST_MESSAGES}`);
      const events = messages.map((m) => m.message).filter(isObject);
      if (events.length === 0) {
        setResults(undefined);
        setNotice('This source has no stored messages yet: send some with its write key (the Live debugger shows them), then test again.');
        return;
      }
      const tested = await api<{ results: TransformationTestResult[]; durationMs: number }>('POST', '/transformations/test', { code, events });
      setResults(tested.results);
      const dropped = tested.results.filter((r) => r.dropped === true).length;
      const failed = tested.results.filter((r) => r.error !== undefined).length;
      setNotice(`Ran on ${tested.results.length} ${tested.results.length === 1 ? 'message' : 'messages'} in ${tested.durationMs} ms: ${dropped} dropped, ${failed} failed. Nothing was stored or sent.`);
    } catch (failed) {
      setResults(undefined);
      setError(failed);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="panel" aria-labelledby="test-title">
      <h2 id="test-title">Test on a source's messages</h2>
      <p class="hint">Runs the code above, saved or not, on the source's last {TEST_MESSAGES} stored messages (newest first), in a sandbox of its own. Nothing is stored or delivered.</p>
      {sources !== undefined && sources.length === 0 && <p>Create a source and send it messages first.</p>}
      {sources !== undefined && sources.length > 0 && (
        <div class="row">
          <SourcePicker sources={sources} value={chosen} label="Messages of" onChange={setSourceId} />
          <button type="button" disabled={busy || code.trim() === ''} onClick={() => void run()}>
            Run on the last {TEST_MESSAGES} messages
          </button>
        </div>
      )}
      <Status>{notice}</Status>
      <ErrorMessage error={error} />
      {results !== undefined && (
        <ol class="test-results" aria-label="Test results">
          {results.map((result, i) => (
            <li key={i} class="test-result">
              <div>
                <h3>Input</h3>
                <pre tabIndex={0}>{JSON.stringify(result.input, null, 2)}</pre>
                <AsIngested filled={result.filled} ingestRejects={result.ingestRejects} />
              </div>
              <div>
                <h3>Output</h3>
                {result.error !== undefined ? (
                  <p class="error">Error: {result.error}</p>
                ) : result.dropped === true ? (
                  <p>
                    <span class="badge filtered">dropped</span>
                  </p>
                ) : (
                  <>
                    {Array.isArray(result.output) && <p class="hint">Split into {result.output.length} messages.</p>}
                    <pre tabIndex={0}>{JSON.stringify(result.output, null, 2)}</pre>
                  </>
                )}
              </div>
              <div>
                <h3>Logged</h3>
                {result.logs.length === 0 ? <p class="hint">Nothing logged.</p> : <pre class="logs" tabIndex={0}>{result.logs.join('\n')}</pre>}
              </div>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
