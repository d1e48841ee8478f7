import { useEffect, useState } from 'preact/hooks';
import { api, type DebuggerEntry } from '../api.js';
import { ErrorMessage } from '../ui.js';

/**
 * The selected message: its status, reason, the transformation that ran on
 * it (version, logged lines, what it did), links to its deliveries and its
 * JSON.
 *
 * The live stream sends a message when it is stored, before the transform
 * stage runs on it, so the entry in the list may not know yet what the
 * transformation did. On selection the detail reads the message once more
 * by its seq and shows it as it is now, and hands it to `onCurrent` so the
 * list's row shows it too. A message opened from a link (a delivery's) has
 * no entry in the list yet: it shows once read.
 */
export function MessageDetail({
  sourceId,
  seq,
  entry,
  onCurrent,
}: {
  sourceId: string;
  seq: number;
  entry: DebuggerEntry | undefined;
  onCurrent: (current: DebuggerEntry) => void;
}) {
  const [current, setCurrent] = useState(entry);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    let live = true;
    api<DebuggerEntry>('GET', `/sources/${encodeURIComponent(sourceId)}/debugger/messages/${seq}`).then(
      (found) => {
        if (!live) return;
        setCurrent(found);
        onCurrent(found);
      },
      // The entry as listed is still right to show; without one, say why there is nothing.
      (failed: unknown) => {
        if (live) setError(failed);
      },
    );
    return () => {
      live = false;
    };
  }, [sourceId, seq]);

  if (current === undefined) return error === undefined ? <p class="hint">Loading message {seq}…</p> : <ErrorMessage error={error} />;
  const { transformation } = current;
  return (
    <>
      <h2>
        Message {current.seq}: {current.type ?? '(none)'}, {current.status}
      </h2>
      {current.reason !== undefined && <p>Reason: {current.reason}</p>}
      {transformation !== undefined && (
        <section class="transformation-run" aria-labelledby={`transformation-${current.seq}`}>
          <h3 id={`transformation-${current.seq}`}>
            Transformation{' '}
            <a href={`#/transformations?id=${encodeURIComponent(transformation.id)}`}>
              {transformation.name} v{transformation.version}
            </a>
          </h3>
          <p>
            {current.status === 'filtered'
              ? 'It dropped the message: nothing was delivered (the reason above).'
              : current.status === 'failed'
                ? 'It failed: the message was not delivered (the reason above). Retrying the delivery runs it again.'
                : 'It ran; the delivery carries its output. The JSON below is the message as stored, before it ran.'}
          </p>
          {transformation.logs.length === 0 ? (
            <p class="hint">It logged nothing.</p>
          ) : (
            <>
              <p>Logged lines:</p>
              <pre class="logs" tabIndex={0}>
                {transformation.logs.join('\n')}
              </pre>
            </>
          )}
        </section>
      )}
      <DeliveryLinks sourceId={sourceId} message={current.message} />
      <pre class="json">{JSON.stringify(current.message, null, 2)}</pre>
    </>
  );
}

/** To the deliveries page, searching this message's deliveries (by its messageId, in its source) and its user's. */
function DeliveryLinks({ sourceId, message }: { sourceId: string; message: unknown }) {
  const fields = typeof message === 'object' && message !== null ? (message as Record<string, unknown>) : {};
  const { messageId, userId } = fields;
  if (typeof messageId !== 'string' && typeof userId !== 'string') return null;
  const search = (params: Record<string, string>): string => `#/deliveries?${new URLSearchParams(params).toString()}`;
  return (
    <p class="row links">
      {typeof messageId === 'string' && <a href={search({ source: sourceId, messageId })}>Deliveries of this message</a>}
      {typeof userId === 'string' && <a href={search({ userId })}>Every delivery of user {userId}</a>}
    </p>
  );
}
