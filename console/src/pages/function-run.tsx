import type { FunctionFetch, FunctionOutcome } from '../api.js';

/**
 * What one call of a function did, shown alike in the function test and in
 * a delivery's attempts: its outcome, each `fetch` it made and its logged lines.
 */

const ms = (duration: number): string => `${Math.round(duration)} ms`;

export function OutcomeBadge({ outcome }: { outcome: FunctionOutcome }) {
  return <span class={`badge outcome-${outcome}`}>{outcome}</span>;
}

export function FetchList({ fetches, label }: { fetches: readonly FunctionFetch[]; label: string }) {
  if (fetches.length === 0) return <p class="hint">No fetch made.</p>;
  return (
    <ol class="fetches" aria-label={label}>
      {fetches.map((fetched, i) => (
        <li key={i}>
          <code>
            {fetched.method} {fetched.url}
          </code>{' '}
          → {fetched.status !== undefined ? `HTTP ${fetched.status}` : `failed: ${fetched.error ?? 'no answer'}`} in {ms(fetched.durationMs)}
        </li>
      ))}
    </ol>
  );
}

export function LoggedLines({ logs }: { logs: readonly string[] }) {
  return logs.length === 0 ? (
    <p class="hint">Nothing logged.</p>
  ) : (
    <pre class="logs" tabIndex={0}>
      {logs.join('\n')}
    </pre>
  );
}

/** The error a call ended with, with its class (RetryError, EventNotSupported, …) when it threw one. */
export function RunError({ error, errorType }: { error: string | undefined; errorType: string | undefined }) {
  if (error === undefined && errorType === undefined) return null;
  return (
    <p class="error">
      {errorType !== undefined && `${errorType}: `}
      {error ?? ''}
    </p>
  );
}

export { ms as formatDuration };
