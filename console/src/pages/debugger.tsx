import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, readEventStream, type DebuggerEntry } from '../api.js';
import { MessageDetail } from './debugger-detail.js';
import { FirstEvent } from './first-event.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ErrorMessage, NoSourceYet, PageTitle, SourcePicker, errorText, formatTime, senderOf, useSources } from '../ui.js';

/** Messages kept in the page; older ones drop off, as in a terminal's scrollback. */
const KEEP = 5_000;
/** Fixed row height: the list renders only the rows in view, positioned by index. */
const ROW_PX = 30;
const VIEW_ROWS = 16;
/** Rows rendered above and below the visible ones, so fast scrolling shows no gaps. */
const OVERSCAN = 8;
const STATUSES = ['accepted', 'rejected', 'duplicate', 'suppressed', 'filtered', 'blocked', 'failed'] as const;
const RECONNECT_MS = 1_000;

export function DebuggerPage({ route }: { route: Route }) {
  const { sources, error } = useSources();
  const sourceId = route.params.get('source') ?? sources?.[0]?.id ?? '';
  /** A message opened from a link (a delivery's): selected, whether or not it is among the newest. */
  const seq = Number(route.params.get('seq') ?? '');
  const linkedSeq = Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Live debugger</PageTitle>
      <ErrorMessage error={error} />
      {sources !== undefined && sources.length === 0 && <NoSourceYet />}
      {sources !== undefined && sources.length > 0 && (
        <>
          <SourcePicker sources={sources} value={sourceId} onChange={(id) => navigate('debugger', { source: id })} />
          <LiveDebugger key={sourceId} sourceId={sourceId} writeKey={sources.find((s) => s.id === sourceId)?.writeKey} linkedSeq={linkedSeq} />
        </>
      )}
    </section>
  );
}

function LiveDebugger({ sourceId, writeKey, linkedSeq }: { sourceId: string; writeKey: string | undefined; linkedSeq: number | undefined }) {
  // Newest first. Held in a ref and copied to state once a frame, however many arrive.
  const entries = useRef<DebuggerEntry[]>([]);
  const [shown, setShown] = useState<DebuggerEntry[]>([]);
  const [paused, setPaused] = useState(false);
  const pausedRef = useRef(false);
  const [held, setHeld] = useState(0);
  const [status, setStatus] = useState('');
  const [type, setType] = useState('');
  /** The selected message's seq, and its entry when the list has it. */
  const [selected, setSelected] = useState<{ seq: number; entry?: DebuggerEntry } | undefined>(linkedSeq === undefined ? undefined : { seq: linkedSeq });
  useEffect(() => {
    if (linkedSeq !== undefined) setSelected({ seq: linkedSeq, entry: entries.current.find((entry) => entry.seq === linkedSeq) });
  }, [linkedSeq]);
  const [connection, setConnection] = useState('connecting');
  const [streamError, setStreamError] = useState<unknown>(undefined);
  const [scrollTop, setScrollTop] = useState(0);
  const [skipped, setSkipped] = useState(0);

  useEffect(() => {
    const abort = new AbortController();
    let frame: number | undefined;
    let lastId: string | undefined;
    const flush = (): void => {
      frame = undefined;
      if (pausedRef.current) return;
      setShown(entries.current.slice());
      setHeld(0);
    };
    const add = (fresh: DebuggerEntry[]): void => {
      // `fresh` is oldest first; the list is newest first.
      entries.current = [...fresh.reverse(), ...entries.current].slice(0, KEEP);
      if (pausedRef.current) setHeld((n) => n + fresh.length);
      else frame ??= requestAnimationFrame(flush);
    };
    const run = async (): Promise<void> => {
      try {
        const recent = await api<{ messages: DebuggerEntry[] }>('GET', `/sources/${sourceId}/debugger?limit=100`);
        entries.current = recent.messages;
        // The stream carries on after the newest message listed (after seq 0 when there was none),
        // so that nothing arriving between the list and the stream's start is missed.
        lastId = String(recent.messages[0]?.seq ?? 0);
        flush();
      } catch (failed) {
        setStreamError(failed);
        return;
      }
      while (!abort.signal.aborted) {
        try {
          const opened = (): void => {
            setConnection('live');
            setStreamError(undefined);
          };
          await readEventStream(`/sources/${sourceId}/debugger/stream`, lastId, abort.signal, (events) => {
            const parsed: DebuggerEntry[] = [];
            for (const event of events) {
              // The server skips a reader that falls far behind to the newest messages, and says how many it passed over.
              const passedOver = /^skipped (\d+) messages/.exec(event.comment ?? '');
              if (passedOver !== null) setSkipped((n) => n + Number(passedOver[1]));
              if (event.data === '') continue;
              try {
                parsed.push(JSON.parse(event.data) as DebuggerEntry);
                if (event.id !== undefined) lastId = event.id;
              } catch {
                // A malformed event is skipped rather than stopping the stream.
              }
            }
            add(parsed);
          }, opened);
        } catch (failed) {
          if (abort.signal.aborted) return;
          setStreamError(failed);
        }
        if (abort.signal.aborted) return;
        setConnection('reconnecting');
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
      }
    };
    void run();
    return () => {
      abort.abort();
      if (frame !== undefined) cancelAnimationFrame(frame);
    };
  }, [sourceId]);

  /** The selected message as it is now (its transformation ran since it arrived): its row shows that too. */
  const replaceEntry = (current: DebuggerEntry): void => {
    entries.current = entries.current.map((entry) => (entry.seq === current.seq ? current : entry));
    if (!pausedRef.current) setShown((list) => list.map((entry) => (entry.seq === current.seq ? current : entry)));
  };

  const togglePause = (): void => {
    pausedRef.current = !pausedRef.current;
    setPaused(pausedRef.current);
    if (!pausedRef.current) {
      setShown(entries.current.slice());
      setHeld(0);
    }
  };

  const types = useMemo(() => [...new Set(shown.map((e) => e.type ?? '(none)'))].sort(), [shown]);
  const filtered = useMemo(
    () => shown.filter((e) => (status === '' || e.status === status) && (type === '' || (e.type ?? '(none)') === type)),
    [shown, status, type],
  );
  const first = Math.max(0, Math.floor(scrollTop / ROW_PX) - OVERSCAN);
  const last = Math.min(filtered.length, Math.ceil(scrollTop / ROW_PX) + VIEW_ROWS + OVERSCAN);

  return (
    <>
      <div class="row toolbar">
        <button type="button" onClick={togglePause} aria-pressed={paused}>
          {paused ? 'Resume' : 'Pause'}
        </button>
        <label class="inline">
          Status
          <select value={status} onChange={(event) => setStatus((event.target as HTMLSelectElement).value)}>
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label class="inline">
          Type
          <select value={type} onChange={(event) => setType((event.target as HTMLSelectElement).value)}>
            <option value="">Any type</option>
            {types.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <span class="status" role="status" aria-live="polite">
          {paused ? `Paused; ${held} new ${held === 1 ? 'message' : 'messages'} held` : connection === 'live' ? 'Live' : connection === 'reconnecting' ? 'Reconnecting…' : 'Connecting…'}
        </span>
        {/* Outside the live region: counts that change with every message would keep a screen reader talking. */}
        <span class="status counts">
          {filtered.length} shown of {shown.length}
          {skipped > 0 && ` · ${skipped} skipped while catching up`}
        </span>
      </div>
      {streamError !== undefined && <p class="error" role="alert">{errorText(streamError)}</p>}
      {connection === 'live' && shown.length === 0 && !paused && writeKey !== undefined && <FirstEvent writeKey={writeKey} />}
      <div class="debugger">
        <div
          class="message-list"
          role="region"
          aria-label="Messages, newest first"
          tabIndex={0}
          style={{ height: `${VIEW_ROWS * ROW_PX}px` }}
          onScroll={(event) => setScrollTop((event.target as HTMLElement).scrollTop)}
        >
          <ul style={{ height: `${filtered.length * ROW_PX}px` }} data-count={filtered.length}>
            {filtered.slice(first, last).map((entry, i) => (
              <li key={entry.seq} style={{ top: `${(first + i) * ROW_PX}px`, height: `${ROW_PX}px` }}>
                <button
                  type="button"
                  class={`message ${entry.status}`}
                  aria-pressed={selected?.seq === entry.seq}
                  onClick={() => setSelected({ seq: entry.seq, entry })}
                  data-seq={entry.seq}
                >
                  <span class="time">{formatTime(entry.receivedAt)}</span>
                  <span class={`badge ${entry.status}`}>{entry.status}</span>
                  <span class="type">{entry.type ?? '(none)'}</span>
                  <span class="summary">{summary(entry)}</span>
                </button>
              </li>
            ))}
          </ul>
        </div>
        {/* Focusable: a long message scrolls inside it, and the keyboard must reach that too. */}
        <div class="message-detail" role="region" aria-label="Selected message" tabIndex={0}>
          {selected === undefined ? (
            <p class="hint">Choose a message to see its JSON.</p>
          ) : (
            <MessageDetail key={selected.seq} sourceId={sourceId} seq={selected.seq} entry={selected.entry} onCurrent={replaceEntry} />
          )}
        </div>
      </div>
    </>
  );
}

/** The one-line gist of a message: the event or name, and who. */
function summary(entry: DebuggerEntry): string {
  const message = entry.message as Record<string, unknown> | null;
  if (message === null || typeof message !== 'object') return entry.reason ?? '';
  const what = message['event'] ?? message['name'] ?? message['groupId'] ?? '';
  const parts = [typeof what === 'string' ? what : '', senderOf(message), entry.reason ?? ''];
  return parts.filter((p) => p !== '').join(' · ');
}
