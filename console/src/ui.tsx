import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Source } from './api.js';

/** Pages take the time format from here with the rest of their helpers (it lives in time.ts). */
export { formatTime } from './time.js';

/** Who sent a message, for a one-line summary: `user u1`, `anonymous a-1` (a message with only an anonymousId), or nothing. */
export function senderOf(message: unknown): string {
  if (message === null || typeof message !== 'object') return '';
  const { userId, anonymousId } = message as Record<string, unknown>;
  if (typeof userId === 'string' && userId !== '') return `user ${userId}`;
  if (typeof anonymousId === 'string' && anonymousId !== '') return `anonymous ${anonymousId}`;
  return '';
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.status === 0 ? error.message : `${error.message} (${error.code})`;
  return String(error);
}

/** What a page loads: the value, the error, and a way to load again. */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): { value: T | undefined; error: unknown; reload: () => void } {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    load().then(
      (loaded) => {
        if (!current) return;
        setValue(loaded);
        setError(undefined);
      },
      (failed: unknown) => {
        if (current) setError(failed);
      },
    );
    return () => {
      current = false;
    };
  }, [...deps, round]);
  const reload = useCallback(() => setRound((n) => n + 1), []);
  return { value, error, reload };
}

export function useSources(): { sources: Source[] | undefined; error: unknown; reload: () => void } {
  const { value, error, reload } = useLoad(async () => (await api<{ sources: Source[] }>('GET', '/sources')).sources, []);
  return { sources: value, error, reload };
}

export function ErrorMessage({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

/** A notice that screen readers announce when it changes. */
export function Status({ children }: { children: ComponentChildren }) {
  return (
    <p class="status" role="status" aria-live="polite">
      {children}
    </p>
  );
}

export function SourcePicker({ sources, value, onChange, label = 'Source', allowAll = false }: {
  sources: Source[];
  value: string;
  onChange: (id: string) => void;
  label?: string;
  allowAll?: boolean;
}) {
  return (
    <label class="inline">
      {label}
      <select value={value} onChange={(event) => onChange((event.target as HTMLSelectElement).value)}>
        {allowAll && <option value="">All sources</option>}
        {sources.map((source) => (
          <option key={source.id} value={source.id}>
            {source.name} ({source.id})
          </option>
        ))}
      </select>
    </label>
  );
}

/** What a page that works on a source says while there is none: where to make one. */
export function NoSourceYet() {
  return (
    <p>
      No source yet. <a href="#/sources">Create one</a>: it gets a write key, which your apps send events with.
    </p>
  );
}

export function PageTitle({ children }: { children: ComponentChildren }) {
  return <h1 id="page-title">{children}</h1>;
}

/**
 * A Delete button that asks first: the question names what is lost, takes
 * the focus on its destructive button, and gives the focus back on "Keep it".
 */
export function ConfirmDelete({ name, what, onConfirm }: { name: string; what: string; onConfirm: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const deleteButton = useRef<HTMLButtonElement>(null);
  const confirmButton = useRef<HTMLButtonElement>(null);
  const wasConfirming = useRef(false);
  const questionId = useId();
  useLayoutEffect(() => {
    if (confirming) confirmButton.current?.focus();
    else if (wasConfirming.current) deleteButton.current?.focus();
    wasConfirming.current = confirming;
  }, [confirming]);
  return (
    <>
      <button type="button" class="danger" ref={deleteButton} onClick={() => setConfirming(true)} aria-label={`Delete ${name}`}>
        Delete
      </button>
      {confirming && (
        <div class="confirm" role="alertdialog" aria-labelledby={questionId}>
          <p id={questionId}>
            Delete <strong>{name}</strong>? {what}
          </p>
          <button
            type="button"
            class="danger"
            ref={confirmButton}
            onClick={() => {
              setConfirming(false);
              onConfirm();
            }}
          >
            Delete {name} for good
          </button>
          <button type="button" class="secondary" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </div>
      )}
    </>
  );
}

/**
 * Under a test run's input: what the run filled in as ingest would have
 * (the code saw those values, the input shows the event as sent), and why
 * ingest would have refused the event.
 */
export function AsIngested({ filled, ingestRejects }: { filled?: Readonly<Record<string, unknown>> | undefined; ingestRejects?: string | undefined }) {
  const names = Object.keys(filled ?? {});
  return (
    <>
      {names.length > 0 && <p class="hint">Filled as ingest would: {names.join(', ')}.</p>}
      {ingestRejects !== undefined && <p class="hint">Ingest would refuse this event: {ingestRejects}</p>}
    </>
  );
}

/** Where a list paged by the API's opaque cursors is: see {@link useCursorPages}. */
export interface CursorPages {
  /** The cursor of the page shown (undefined: the first). */
  readonly cursor: string | undefined;
  /** Its number, from 1. */
  readonly page: number;
  readonly back: () => void;
  readonly forward: (cursor: string) => void;
}

/** Paging by the API's cursors: the cursors of the pages so far (the first page has none), so Previous can go back. */
export function useCursorPages(): CursorPages {
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  return {
    cursor: cursors.at(-1),
    page: cursors.length,
    back: () => setCursors((all) => (all.length > 1 ? all.slice(0, -1) : all)),
    forward: (cursor) => setCursors((all) => [...all, cursor]),
  };
}

/** "Previous …" when there is a page before, "Next …" when the answer gave a cursor to one after. */
export function PageButtons({ pages, next, noun }: { pages: CursorPages; next: string | undefined; noun: string }) {
  return (
    <>
      {pages.page > 1 && (
        <button type="button" class="secondary" onClick={pages.back}>
          Previous {noun}
        </button>
      )}
      {next !== undefined && (
        <button type="button" class="secondary" onClick={() => pages.forward(next)}>
          Next {noun}
        </button>
      )}
    </>
  );
}
