import { useEffect, useState } from 'preact/hooks';
import { api, type DebuggerEntry } from '../api.js';

/** How far back the detail looks for the message's current state: the debugger list's largest page. */
const RECHECK_LIMIT = 500;

/**
 * The selected message: its status, reason, the transformation that ran on
 * it (version, logged lines, what it did) and its JSON.
 *
 * The live stream sends a message when it is stored, before the transform
 * stage runs on it, so the entry in the list may not know yet what the
 * transformation did. On selection the detail reads the source's recent
 * messages once more and shows the message as it is now (when it is still
 * among the newest 500; the API has no route for one message), and hands it
 * to `onCurrent` so the list's row shows it too.
 */
export function MessageDetail({ sourceId, entry, onCurrent }: { sourceId: string; entry: DebuggerEntry; onCurrent: (current: DebuggerEntry) => void }) {
  const [current, setCurrent] = useState(entry);
  useEffect(() => {
    let live = true;
    api<{ messages: DebuggerEntry[] }>('GET', `/sources/${sourceId}/debugger?limit=${RECHECK_LIMIT}`).then(
      ({ messages }) => {
        const found = messages.find((message) => message.seq === entry.seq);
        if (!live || found === undefined) return;
        setCurrent(found);
        onCurrent(found);
      },
      // The entry as listed is still right to show; the list and the stream report their own errors.
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [sourceId, entry.seq]);

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
      <pre class="json">{JSON.stringify(current.message, null, 2)}</pre>
    </>
  );
}
